"""Ports for throwaway servers: one claimed by a running process is handed to no other process
(a stopped master's replica still calls its port back), and comes free when the claimer exits."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from turbolock import free_ports
from turbolock.free_ports import NoFreePortError, claim_free_port

SPARE_RANGE = (23000, 29999)
"""Above the cluster nodes' ports, below their buses': nothing else of the suite binds here."""

CLAIMER = """
import sys
from turbolock.free_ports import claim_free_port
print(claim_free_port(int(sys.argv[1]), int(sys.argv[2])), flush=True)
sys.stdin.readline()
"""


def claimer(lowest: int, highest: int) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([sys.executable, "-c", CLAIMER, str(lowest), str(highest)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def test_a_port_another_process_claimed_is_not_handed_out_until_it_exits() -> None:
    process, port = claimer(*SPARE_RANGE)
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


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


@pytest.mark.parametrize("age, cleared", [(free_ports.STALE_CLAIM_AGE + 60, True), (5.0, False)])
def test_a_dead_process_claim_is_cleared_once_old(age: float, cleared: bool) -> None:
    process, port = claimer(*SPARE_RANGE)
    process.communicate("\n", timeout=10)
    claim = free_ports._claims_directory / str(port)
    claim.write_text(str(dead_pid()))  # as if its claimer had been killed
    os.utime(claim, (time.time() - age, time.time() - age))
    if cleared:
        assert claim_free_port(port, port) == port
    else:
        with pytest.raises(NoFreePortError):
            claim_free_port(port, port)
        claim.unlink()
