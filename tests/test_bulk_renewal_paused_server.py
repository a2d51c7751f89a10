"""Auto-renewal of bulk-acquired locks, both fronts and cores, against a server paused,
killed and restarted empty, and leases released while a round waits for a paused server."""

from __future__ import annotations

import time

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from _lost_locks import LostLocks
from turbolock import LockError, LockLostError, OutcomeUnknownError
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

TTL = 1.0
T = 0.2
N = 2500


def _fronts(server: RedisServer, front: str, core: str, prefix: str) -> Fronts:
    return Fronts.at(front, server.url, core=core, key_prefix=prefix, timeout=T,
                  connect_timeout=T)


def _ours(raw: redis.Redis, prefix: str, token_of: dict[bytes, bytes]) -> list[bytes]:
    keys = list(raw.scan_iter(match=prefix + "*", count=5000))
    values = raw.mget(keys) if keys else []
    return [k for k, v in zip(keys, values, strict=True) if v is not None and token_of.get(k) == v]


@pytest.mark.parametrize("front", FRONTS)
def test_bulk_renewed_locks_on_a_paused_server_are_lost_and_not_left_held(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    fronts = _fronts(own_server, front, core_name, key_prefix)
    raw = redis.Redis(port=own_server.port)
    lost = LostLocks()
    try:
        client = fronts.make()
        result = client.acquire_many([f"p{i}" for i in range(N)], TTL, auto_renew=True, on_lost=lost)
        assert len(result.acquired) == N
        token_of = {key_prefix.encode() + lease.key: lease.token for lease in result.acquired}
        time.sleep(0.8)  # one renewal round went through
        assert not result.lost
        own_server.pause()
        try:
            paused = time.monotonic()
            assert eventually(lambda: len(result.lost) == N, TTL * 3), f"{len(result.lost)} of {N} lost"
            latest = max(lease.expires_at for lease in result.acquired)
            # Reported by about the leases' expiry (2,500 on_lost calls and warnings, on a busy host).
            assert time.monotonic() <= max(latest, paused) + TTL / 2
        finally:
            own_server.resume()
        assert eventually(lambda: len(lost.names) == N, 2.0), len(lost.names)
        for lease in result.acquired[:5]:
            with pytest.raises(LockLostError):
                lease.ensure_held()
        # A renewal buffered in the paused server ran on resume: those keys are released in
        # the background, not left held with our token for a new ttl.
        assert eventually(lambda: not _ours(raw, key_prefix, token_of), 2.0), (
            f"{len(_ours(raw, key_prefix, token_of))} keys reported lost still hold our token")
    finally:
        fronts.close()
        raw.close()


@pytest.mark.parametrize("front", FRONTS)
def test_releasing_renewed_leases_while_a_round_waits_for_a_paused_server(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    fronts = _fronts(own_server, front, core_name, key_prefix)
    raw = redis.Redis(port=own_server.port)
    lost = LostLocks()
    ttl = 6.0
    try:
        client = fronts.make(timeout=1.0, connect_timeout=1.0)
        result = client.acquire_many([f"r{i}" for i in range(N)], ttl, auto_renew=True, on_lost=lost)
        leases = result.acquired
        # the first round goes out 4 s after the acquire; pause the server just before it
        time.sleep(3.9)
        own_server.pause()
        try:
            time.sleep(0.3)  # the round is in flight, waiting
            try:
                client.release_many(leases[: N // 2])
                outcome: object = "released"
            except LockError as exc:  # unconfirmed (retried), or never sent (still ours)
                outcome = exc
        finally:
            own_server.resume()
        assert client.renewing == N - N // 2, (client.renewing, len(lost.names), lost.names[:3], outcome)
        # released leases are never reported lost; the others stay held and renewed
        time.sleep(ttl)
        assert lost.names == [], f"{len(lost.names)} reported lost ({outcome!r})"
        assert eventually(lambda: client.pending_cleanup == 0, 3.0)
        if isinstance(outcome, OutcomeUnknownError) or outcome == "released":
            remaining = sum(1 for _ in raw.scan_iter(match=key_prefix + "*", count=5000))
            assert remaining == N - N // 2, remaining
        assert not any(lease.is_lost for lease in leases[N // 2:])
        assert client.release_many(leases[N // 2:]) == [True] * (N - N // 2)
    finally:
        fronts.close()
        raw.close()
