"""``turbolock bench`` end to end against a real throwaway server: every contender's row, the
paired ratios, the JSON's samples, a real PNG and SVG, nothing left on the server, bad arguments
refused before anything is measured, and the contention check catching a lock that does not
exclude (its negative control)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import turbolock
from turbolock.bench.contenders import BenchmarkError, hiredis_available
from turbolock.bench.contention import contend
from turbolock.cli import main
from turbolock.redis_server import RedisServer


@pytest.fixture(scope="module")
def bench_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["bench", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bench_measures_every_contender_and_writes_json_and_a_png(
        bench_server: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    code, table, err = _run(capsys, "--url", bench_server.url, "--quick", "--repeats", "2",
                            "--json", str(out), "--plot", str(png))
    assert code == 0, err
    variants = ["+ hiredis", "(no hiredis)"] if hiredis_available() else ["(no hiredis)"]
    core = turbolock.implementation
    for label in (f"turbolock ({core} core)", "redis-py SET NX + Lua release (hand-written)",
                  *(f"redis-py Lock {v}" for v in variants),
                  *(f"redis-py pipeline, 1000 per execute {v}" for v in variants),
                  "redis-py pipeline; release: one script per 1000 locks (hand-written)",
                  f"turbolock extend_many ({core} core)",
                  *(f"redis-py, one script per 1000 locks, pipelined (hand-written) {v}" for v in variants),
                  f"turbolock Lock, woken by the release ({core} core)",
                  *(f"redis-py Lock, sleep=1ms {v}" for v in variants)):
        assert f"  {label}  " in table, label
    document = json.loads(out.read_text())
    by_id = {metric["id"]: metric for metric in document["metrics"]}
    assert list(by_id) == ["pairs", "bulk-acquire", "bulk-release", "renewal", "contention"]
    for metric in by_id.values():
        ours, *others = metric["rows"]
        assert ours["contender"].startswith("turbolock") and ours["turbolock_over_this"] is None
        assert len(others) == {"pairs": 1 + len(variants), "bulk-acquire": 1 + len(variants),
                               "bulk-release": 1 + len(variants)}.get(metric["id"], len(variants))
        for row in metric["rows"]:
            assert len(row["samples"]) == 2 and all(value > 0 for value in row["samples"])
            assert row["summary"]["low"] <= row["summary"]["median"] <= row["summary"]["high"]
        for row in others:
            ratios = sorted(a / b for a, b in zip(ours["samples"], row["samples"], strict=True))
            assert row["turbolock_over_this"]["median"] == pytest.approx((ratios[0] + ratios[1]) / 2)
    assert document["meta"]["repeats"] == 2 and document["meta"]["server_version"].count(".") == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    assert imread(png).shape[0] > 400  # a real image, one panel per figure
    assert redis.Redis.from_url(bench_server.url).dbsize() == 0  # every lock it took, it released


def test_bench_json_to_stdout_and_an_svg(bench_server: RedisServer, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    svg = tmp_path / "pairs.svg"
    code, stdout, err = _run(capsys, "--url", bench_server.url, "--quick", "--repeats", "1",
                             "--only", "pairs", "--json", "-", "--plot", str(svg))
    assert code == 0, err
    document = json.loads(stdout)  # stdout holds the JSON alone; the table went to stderr
    assert [metric["id"] for metric in document["metrics"]] == ["pairs"]
    assert "acquire + release" in err
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg")) and "</svg>" in svg.read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["--only", "pairs,nope"], "--only: unknown workload 'nope'"),
    (["--plot", "out.gif"], "--plot: 'out.gif' must end in .png or .svg"),
])
def test_bad_arguments_fail_before_anything_is_measured(argv: list[str], message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # A URL no server answers: a refusal that reached the network would be a connection error.
    code, stdout, err = _run(capsys, "--url", "redis://127.0.0.1:1/0", *argv)
    assert code == 2 and message in err and stdout == ""


def test_argparse_refuses_zero_repeats() -> None:
    done = subprocess.run([sys.executable, "-m", "turbolock", "bench", "--repeats", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--repeats: must be at least 1" in done.stderr


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path: Path) -> None:
    plot = str(tmp_path / "x.png")
    program = ("import sys; sys.modules['matplotlib'] = None\n"
               "from turbolock.cli import main\n"
               f"sys.exit(main(['bench', '--url', 'redis://127.0.0.1:1/0', '--plot', {plot!r}]))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--plot needs matplotlib: pip install 'turbolock[cli]'" in done.stderr
    assert not (tmp_path / "x.png").exists()


class _NotALock:
    """Lets everyone in: what the contention check must catch."""

    def acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


def test_the_contention_check_catches_a_lock_that_does_not_exclude() -> None:
    with pytest.raises(BenchmarkError, match="two workers held the lock at once"):
        contend([_NotALock() for _ in range(4)], 0.5)


def test_the_contention_check_passes_a_lock_that_excludes() -> None:
    shared = threading.Lock()  # the positive control: same harness, a real mutual exclusion

    class _ThreadLock:
        def acquire(self) -> bool:
            return shared.acquire(timeout=5)

        def release(self) -> None:
            shared.release()

    result = contend([_ThreadLock() for _ in range(4)], 0.3)
    assert result.handoffs > 10 and result.rate > 0
