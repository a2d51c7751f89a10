"""benchmarks/leak_check.py on a short run: it runs on both cores and finds their memory flat, and it
reports a leak when one is put in on purpose (in Python objects, or in malloc'd memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _leak_check(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """Run the checker; its outcome and each ``core memory`` row's verdict ("yes" or "NO")."""
    run = subprocess.run([sys.executable, "-m", "benchmarks.leak_check", "--json", str(tmp_path / "out.json"),
                          *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    rows = [line.split("|")[1:-1] for line in run.stdout.splitlines() if line.startswith("| c ")
            or line.startswith("| py ")]
    return run, {f"{row[0].strip()} {row[1].strip()}": row[-1].strip() for row in rows}


def test_a_short_run_is_flat_on_both_cores(tmp_path: Path) -> None:
    run, verdicts = _leak_check(tmp_path, "--ops", "20000", "--samples", "20")
    assert run.returncode == 0, run.stdout + run.stderr
    assert verdicts == {
        f"{core} {memory}": "yes" for core in ("c", "py") for memory in ("tracemalloc", "rss")
    }
    assert "memory is flat" in run.stdout
    runs = json.loads((tmp_path / "out.json").read_text())["runs"]
    assert [r["core"] for r in runs] == ["c", "py"]
    for r in runs:
        assert len(r["ops"]) == len(r["rss"]) == len(r["tracemalloc"]) == 20
        assert r["ops"][-1] == 20000


def test_a_python_leak_is_reported(tmp_path: Path) -> None:
    run, verdicts = _leak_check(tmp_path, "--ops", "10000", "--samples", "20", "--cores", "c",
                                "--inject-leak", "python", "--leak-bytes", "64")
    assert run.returncode == 1, run.stdout + run.stderr
    assert verdicts["c tracemalloc"] == "NO"
    assert "memory GROWS" in run.stdout


def test_a_native_leak_is_reported_by_rss_alone(tmp_path: Path) -> None:
    # tracemalloc never sees malloc'd memory: only the RSS series can catch a leak inside C code.
    run, verdicts = _leak_check(tmp_path, "--ops", "10000", "--samples", "20", "--cores", "c",
                                "--inject-leak", "native", "--leak-bytes", "256")
    assert run.returncode == 1, run.stdout + run.stderr
    assert verdicts == {"c tracemalloc": "yes", "c rss": "NO"}
