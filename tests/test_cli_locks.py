"""``turbolock locks list|inspect|release`` against a real server: what is listed (every lock
under the prefix once, with its time left, through SCAN), globs in a prefix taken literally,
inspect's answer and exit code, and a forced release that asks first, frees the lock, and is
found by its holder; tokens never printed."""

from __future__ import annotations

import pytest

from turbolock import Lease, LockClient
from turbolock.cli import main
from turbolock.redis_server import RedisServer


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(["locks", *argv])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_list_shows_every_lock_under_the_prefix_once(redis_server: RedisServer, client: LockClient,
                                                     key_prefix: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    names = [f"shard:{i}" for i in range(2500)]
    result = client.acquire_many(names, 30)
    assert result.all_acquired
    with LockClient.from_url(redis_server.url, key_prefix="x" + key_prefix) as other:
        elsewhere = other.try_acquire("shard:0", 30)  # another prefix: not listed
        assert elsewhere is not None
        code, lines, err = _run(capsys, "list", redis_server.url, "--prefix", key_prefix)
        assert other.release(elsewhere)
    assert code == 0 and err.strip() == "2500 locks"
    listed = dict(line.split("\t") for line in lines)
    assert sorted(listed) == sorted(names)
    assert all(20.0 < float(left.removesuffix(" s")) <= 30.0 for left in listed.values())
    assert not any(lease.token.hex() in "\n".join(lines) for lease in result.acquired[:50])
    code, lines, _ = _run(capsys, "list", redis_server.url, "--prefix", key_prefix, "--match", "shard:1?",
                          "--limit", "5")
    wanted = {f"shard:1{digit}" for digit in range(10)}
    assert code == 0 and len(lines) == 5 and all(line.split("\t")[0] in wanted for line in lines)


def test_a_prefix_with_glob_characters_is_taken_literally(redis_server: RedisServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with LockClient.from_url(redis_server.url, key_prefix="t*[a]:") as literal, \
            LockClient.from_url(redis_server.url, key_prefix="tZa:") as lookalike:
        assert literal.try_acquire("mine", 30) is not None
        assert lookalike.try_acquire("not-mine", 30) is not None  # would match the prefix as a glob
        code, lines, _ = _run(capsys, "list", redis_server.url, "--prefix", "t*[a]:")
    assert code == 0 and [line.split("\t")[0] for line in lines] == ["mine"]


def test_inspect_says_held_or_not(redis_server: RedisServer, client: LockClient, key_prefix: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert client.try_acquire("job", 20) is not None
    code, lines, _ = _run(capsys, "inspect", redis_server.url, "job", "--prefix", key_prefix)
    assert code == 0 and lines[0].startswith("job: held, 19.") and lines[0].endswith(" s left")
    code, lines, _ = _run(capsys, "inspect", redis_server.url, "free", "--prefix", key_prefix)
    assert code == 1 and lines == ["free: not held"]


def test_release_by_force_asks_first_and_its_holder_finds_out(
        redis_server: RedisServer, client: LockClient, key_prefix: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    lease = client.try_acquire("stuck", 60)
    assert lease is not None
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "n")
    code, lines, _ = _run(capsys, "release", redis_server.url, "stuck", "--force", "--prefix", key_prefix)
    assert code == 1 and lines[-1] == "not released" and "by force" in asked[0]
    assert client.check(lease) is not None
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    code, lines, _ = _run(capsys, "release", redis_server.url, "stuck", "--force", "--prefix", key_prefix)
    assert code == 0 and lines[-1] == "stuck: released"
    assert client.check(lease) is None  # the holder finds its lock gone
    assert client.try_acquire("stuck", 60) is not None
    code, lines, _ = _run(capsys, "release", redis_server.url, "stuck", "--force", "--yes", "--prefix",
                          key_prefix)
    assert code == 0 and lines == ["stuck: released"]
    code, lines, _ = _run(capsys, "release", redis_server.url, "stuck", "--force", "--yes", "--prefix",
                          key_prefix)
    assert code == 1 and lines == ["stuck: not held"]


def test_bad_arguments_are_refused(redis_server: RedisServer, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as no_force:
        main(["locks", "release", redis_server.url, "stuck"])
    assert no_force.value.code == 2 and "--force" in capsys.readouterr().err
    code, _, err = _run(capsys, "list", "http://example.com")
    assert code == 2 and "scheme" in err
    with pytest.raises(SystemExit) as bad_limit:
        main(["locks", "list", redis_server.url, "--limit", "0"])
    assert bad_limit.value.code == 2


def test_release_by_force_deletes_only_the_holder_it_asked_about(
        redis_server: RedisServer, client: LockClient, key_prefix: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # While the operator reads the prompt, the stuck holder finishes and another takes the lock:
    # the "y" deleted the new holder's lock, one nobody was asked about (found in review).
    stuck = client.try_acquire("job", 60)
    assert stuck is not None
    taken_meanwhile: list[Lease | None] = []

    def operator_reads_slowly(prompt: str) -> str:
        assert client.release(stuck)
        taken_meanwhile.append(client.try_acquire("job", 60))
        return "y"

    monkeypatch.setattr("builtins.input", operator_reads_slowly)
    code, lines, _ = _run(capsys, "release", redis_server.url, "job", "--force", "--prefix", key_prefix)
    new_holder = taken_meanwhile[0]
    assert new_holder is not None
    assert code == 1 and lines[-1].startswith("job: gone before it could be released"), lines
    assert client.check(new_holder) is not None, "the new holder's lock was deleted"
    assert stuck.token.hex() not in "\n".join(lines) and new_holder.token.hex() not in "\n".join(lines)
