"""A call that times out on a stopped master makes a Sentinel client ask the Sentinels again, so
after they fail it over and it comes back (a master still, for a moment) the next lock is taken
on the new master, not on the one being demoted (where the demotion would lose it). Found in
review: ``blames_master`` spared every timeout as if cut short (each call's deadline is made a
moment before the call starts, so it always had a little less than a whole timeout).

The once-a-second check of the Sentinels is switched off (as the failover test's control does):
it narrows the window to about a second; the call's own guard is what is tested."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from _blocking_async import FRONTS
from turbolock import ConnectionError
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_checks_off, sentinel_fronts, value_on

T = 0.5


@pytest.mark.parametrize("front", FRONTS)
def test_a_timed_out_call_makes_the_client_ask_the_sentinels_again(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str, front: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=3, down_after=1000)
    fronts = sentinel_fronts(front, group, core_name, key_prefix, timeout=T, connect_timeout=T)
    old_port = group.master_port()
    master = group.node_at(old_port)
    try:
        client = fronts.make()
        assert client.query("warm-up").held is False
        master.pause()
        try:
            with pytest.raises(ConnectionError):
                client.query("during")  # no answer within the call's timeout
            new_master = group.wait_failover(old_port)
        finally:
            master.resume()
        lease = client.try_acquire("after", 30)  # went to the old master, or fails on it
        assert lease is not None
        assert value_on(new_master, key_prefix + "after") == lease.token, "taken on the demoted master"
    finally:
        fronts.close()
