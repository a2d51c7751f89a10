"""close() while a call asks the Sentinels for the master (the first one hung): close() serves
the call, which finds the master past the hung Sentinel, before it closes the connections (the
Sentinels' too). It ended in a plain ``ConnectionError`` ("no Sentinel gave the master"): the
Sentinel loop caught the closed table's error as one more Sentinel that did not answer; then,
on threads, in ``ClientClosedError`` (close() closed the Sentinels under it). The control: a
call left alone finds the master the same way."""

from __future__ import annotations

import time

import pytest

from _blocking_async import FRONTS
from _in_thread import InThread
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts

TIMEOUT = 2.0


@pytest.mark.parametrize("close", [True, False], ids=["closed", "control"])
@pytest.mark.parametrize("front", FRONTS)
def test_a_call_asking_the_sentinels_is_served_when_the_client_closes(
        sentinel_group: RedisSentinel, core_name: str, key_prefix: str, front: str, close: bool) -> None:
    fronts = sentinel_fronts(front, sentinel_group, core_name, key_prefix, timeout=TIMEOUT,
                             connect_timeout=TIMEOUT)
    sentinel_group.sentinels[0].pause()
    try:
        client = fronts.make()
        caller = InThread(lambda: client.query("asking"))
        time.sleep(0.3)  # the call waits on the hung Sentinel (half its deadline)
        if close:
            client.close()
        caller.join(TIMEOUT + 2)
        assert not caller.is_alive()
    finally:
        sentinel_group.sentinels[0].resume()
        fronts.close()
    if close:  # close() serves the calls under way, their connection being opened too, until its
        # deadline: the Sentinels close after (threads: they closed under the call, ClientClosedError)
        assert getattr(caller.outcome, "held", None) is False, repr(caller.outcome)
    else:
        assert getattr(caller.outcome, "held", None) is False, repr(caller.outcome)
