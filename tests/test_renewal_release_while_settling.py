"""A lease released while the renewal round that renewed it is being settled stays released
(``valid_for()`` 0, ``ensure_held()`` raises): the round's settle wrote a fresh expiry over the
release's, and a released lock, anyone's now, looked held. Found in review. The Cluster and
Redlock twins are in their directories."""

from __future__ import annotations

import pytest
import redis

from _release_race import assert_stays_released, release_while_settling
from turbolock import LockClient

pytestmark = pytest.mark.timing  # the race is arranged with sleeps of a fraction of a second


def test_a_released_lease_stays_released_when_a_round_renewed_it(client: LockClient,
                                                                 raw: redis.Redis) -> None:
    victim = release_while_settling(client, lambda name: raw.set(client.key_prefix + name.encode(), b"thief",
                                                                 px=10_000), same_batch=False)
    assert raw.exists(client.key_prefix + b"victim") == 0
    assert_stays_released(victim)
