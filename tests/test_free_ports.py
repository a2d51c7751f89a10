"""Ports for throwaway servers: one claimed by a running process is handed to no other process
(a stopped master's replica still calls its port back), and comes free when the claimer is gone,
however it ended. Each test uses a claims directory of its own (the machine's is shared by runs)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from turbolock import free_ports
from turbolock.free_ports import NoFreePortError, claim_free_port

SPARE_RANGE = (23000, 29999)
"""Above the cluster nodes' ports, below their buses': nothing else of the suite binds here."""

CLAIMER = """
import sys
from turbolock.free_ports import claim_free_port
ports = [claim_free_port(int(sys.argv[1]), int(sys.argv[2])) for _ in range(int(sys.argv[3]))]
print(" ".join(map(str, ports)), flush=True)
sys.stdin.readline()
"""


@pytest.fixture(autouse=True)
def claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process's and its children's claims directory (``$TMPDIR/turbolock-ports-<uid>``)."""
    directory = tmp_path / f"turbolock-ports-{os.getuid()}"
    monkeypatch.setattr(free_ports, "_claims_directory", directory)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return directory


def claimer(lowest: int, highest: int, count: int = 1) -> subprocess.Popen[str]:
    """Another process that claims ``count`` ports of the range and holds them until told to exit."""
    return subprocess.Popen([sys.executable, "-c", CLAIMER, str(lowest), str(highest), str(count)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def claimed(process: subprocess.Popen[str]) -> list[int]:
    assert process.stdout is not None
    return [int(port) for port in process.stdout.readline().split()]


def test_a_port_another_process_claimed_is_not_handed_out_until_it_exits() -> None:
    process = claimer(*SPARE_RANGE)
    (port,) = claimed(process)
    try:
        with pytest.raises(NoFreePortError):
            claim_free_port(port, port)  # free to bind: nothing listens there
    finally:
        process.communicate("\n", timeout=10)
    assert process.returncode == 0
    assert claim_free_port(port, port) == port


def test_a_process_is_never_handed_the_same_port_twice() -> None:
    port = claim_free_port(*SPARE_RANGE)
    with pytest.raises(NoFreePortError):
        claim_free_port(port, port)


def test_the_claim_of_a_process_that_is_gone_is_taken_at_once(claims: Path) -> None:
    process = claimer(*SPARE_RANGE)
    (port,) = claimed(process)
    process.kill()  # no exit handler runs: its claim stays behind
    process.wait()
    assert (claims / str(port)).read_text() == str(process.pid)
    assert claim_free_port(port, port) == port


def _claim_in_child(results: Any) -> None:
    results.put(claim_free_port(*SPARE_RANGE))  # a multiprocessing child ends with os._exit


def test_a_forked_childs_claim_goes_when_the_child_ends(claims: Path) -> None:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_claim_in_child, args=(results,))
    child.start()
    port = results.get(timeout=10)
    child.join(10)
    assert child.exitcode == 0
    assert (claims / str(port)).read_text() == str(child.pid)
    other = claimer(port, port)  # another process: this one skips its child's ports
    try:
        assert claimed(other) == [port]
    finally:
        other.communicate("\n", timeout=10)


def test_processes_claiming_at_once_never_share_a_port(claims: Path) -> None:
    lowest, highest = SPARE_RANGE[0], SPARE_RANGE[0] + 119
    claims.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    for port in range(lowest, highest + 1, 2):  # half the range: claims of a process that is gone
        (claims / str(port)).write_text(str(gone.pid))
    processes = [claimer(lowest, highest, 25) for _ in range(4)]
    try:
        ports = [claimed(process) for process in processes]
    finally:
        for process in processes:
            process.communicate("\n", timeout=10)
    handed = [port for some in ports for port in some]
    assert len(handed) == 100
    assert len(set(handed)) == 100, "a port was handed to two processes"
