"""``turbolock doctor``'s waking check subscribed to the channel ``turbolock-doctor``, but a lock
client subscribes to its lock's *key* (``turbolock:<name>``, key prefix included: see
``_sync/waker.py``). A user whose channels are limited to the key prefix (``&turbolock:*``, the
natural hardening next to ``~turbolock:*``) has blocking acquires woken by releases, yet the
doctor told the operator "SSUBSCRIBE refused ... blocking acquires poll instead of being woken";
and it said "ok" for a user allowed ``&turbolock-doctor`` but no lock channel at all (found in
review). It now subscribes to its own lock's key."""

from __future__ import annotations

import pytest
import redis

from turbolock.cli import main
from turbolock.redis_server import RedisServer

PASSWORD = "doctor-Waking-Pa55word"


def test_waking_is_judged_on_the_channel_the_clients_subscribe_to(capsys: pytest.CaptureFixture[str]) -> None:
    acl = f"user locker on >{PASSWORD} ~turbolock:* resetchannels &turbolock:* +@all"
    with RedisServer(extra_config=[acl]) as server:
        url = f"redis://locker:{PASSWORD}@{server.host}:{server.port}/0"
        # What a LockClient waiting on lock "job" does: SSUBSCRIBE to its key. Allowed.
        listener = redis.Redis.from_url(url)
        sub = listener.pubsub()
        sub.ssubscribe("turbolock:job")
        confirmed = sub.get_sharded_message(timeout=5.0)
        sub.close()
        listener.close()
        assert confirmed and confirmed["type"] == "ssubscribe"
        main(["doctor", url])
        out = capsys.readouterr().out
    waking = next(line for line in out.splitlines() if "waking:" in line)
    assert waking.startswith("ok"), out


def test_waking_is_not_ok_for_a_user_whose_lock_channels_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The converse: channels granted for ``turbolock-doctor`` only. Every lock client's
    SSUBSCRIBE (to ``turbolock:<name>``) is refused and its waiters poll, yet the doctor says ok."""
    acl = f"user locker on >{PASSWORD} ~turbolock:* resetchannels &turbolock-doctor +@all"
    with RedisServer(extra_config=[acl]) as server:
        url = f"redis://locker:{PASSWORD}@{server.host}:{server.port}/0"
        listener = redis.Redis.from_url(url)
        sub = listener.pubsub()
        with pytest.raises(redis.ResponseError, match="permissions"):
            sub.ssubscribe("turbolock:job")  # what a LockClient waiting on lock "job" sends
            sub.get_sharded_message(timeout=5.0)
        sub.close()
        listener.close()
        main(["doctor", url])
        out = capsys.readouterr().out
    waking = next(line for line in out.splitlines() if "waking:" in line)
    assert not waking.startswith("ok"), out


def test_waking_is_not_ok_for_a_user_whose_releases_cannot_publish(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A user allowed to subscribe and not to publish: the release script's SPUBLISH is refused
    and goes on without a word, so every waiter polls; the doctor said ok (it tried SSUBSCRIBE
    alone) and advised only ``&*``. Found in review."""
    acl = f"user locker on >{PASSWORD} ~turbolock:* &* +@all -spublish"
    with RedisServer(extra_config=[acl]) as server:
        main(["doctor", f"redis://locker:{PASSWORD}@{server.host}:{server.port}/0"])
        out = capsys.readouterr().out
    waking = next(line for line in out.splitlines() if "waking:" in line)
    assert not waking.startswith("ok") and "SPUBLISH refused" in waking, out
    assert "+ssubscribe +sunsubscribe +spublish" in waking and PASSWORD not in out
