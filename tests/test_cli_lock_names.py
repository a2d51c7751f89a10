"""``turbolock locks`` tells a lock by what its key is (a string with a ttl), not by its name: a
held lock named like a fair lock's queue or a counter (``{orders}:queue``) was hidden from
``list``, reported "not held" by ``inspect`` and refused by ``release --force``. And two locks
never print as the same name: a backslash is doubled, so ``a\\tb`` (a backslash) and ``a<tab>b``
(shown as ``a\\tb``) print apart. Found in review."""

from __future__ import annotations

import pytest

from turbolock import LockClient
from turbolock.cli import main
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("name", ["{orders}:queue", "{tenant}:fence", "{jobs}:asked"])
def test_a_held_lock_whose_name_ends_like_an_own_key_is_a_lock(
        redis_server: RedisServer, client: LockClient, key_prefix: str,
        capsys: pytest.CaptureFixture[str], name: str) -> None:
    lease = client.try_acquire(name, 30)
    assert lease is not None
    try:
        assert main(["locks", "list", redis_server.url, "--prefix", key_prefix]) == 0
        listed = capsys.readouterr().out
        code = main(["locks", "inspect", redis_server.url, name, "--prefix", key_prefix])
        inspected = capsys.readouterr().out
        assert (listed.split("\t")[0], code, inspected.split(",")[0]) == (name, 0, f"{name}: held")
        assert main(["locks", "release", redis_server.url, name, "--prefix", key_prefix, "--force",
                     "--yes"]) == 0
        assert client.query(name).held is False
    finally:
        client.release(lease)


def test_two_locks_never_print_as_the_same_name(redis_server: RedisServer, client: LockClient,
                                               key_prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    leases = [client.try_acquire(name, 30) for name in ("a\tb", "a\\tb", "c\\xff", b"c\xff")]
    assert all(leases)
    try:
        assert main(["locks", "list", redis_server.url, "--prefix", key_prefix]) == 0
        lines = sorted(line.split("\t")[0] for line in capsys.readouterr().out.splitlines())
        assert lines == ["a\\\\tb", "a\\tb", "c\\\\xff", "c\\xff"], lines
    finally:
        for lease in leases:
            client.release(lease)
