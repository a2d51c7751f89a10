"""The resource's half of fencing: a store that refuses work done under an old lock grant.

A lock with a ttl cannot stop a holder that pauses past it (GC, SIGSTOP, a slow disk) from
acting after someone else took the lock; only the resource can refuse the late action, if each
grant carries a number that grows: ``lease.fence`` of a ``fenced=True`` acquire.

``FencedStore`` keeps values in a Redis of the resource's own (any server, through redis-py),
each key a hash of ``value`` and ``fence``, the highest fence that has touched it. Reads are
fenced too, not only writes: in a read-modify-write, a holder that read the old value, paused
and lost the lock would otherwise still write it back after its successor *read* but before the
successor wrote, and one of the two updates would be lost. With both fenced, once the successor
has read, the paused holder's write is refused.

For SQL resources the same check is one statement per read or write: ``turbolock.fenced_sql``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.asyncio.cluster import ClusterPipeline as AsyncClusterPipeline
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import ResponseError

from turbolock.errors import (
    FencedWriteError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    ReplyError,
    StaleFenceError,
)

__all__ = ["MAX_FENCE", "Fence", "FencedStore"]

# A fence is one number (one server: ``lease.fence``) or, for a Redlock, one per master
# (``lease.fences``): ARGV[1] = how many numbers, then (field, fence) pairs, the field being
# 'fence' or 'fence:<master>'. Every number must be at least the highest its field has seen;
# then each field keeps the higher of the two.

# KEYS[1] = the resource's key (a hash); ARGV as above. Returns ``refused`` when a number of the
# fence is lower than its field's (nothing changes), else records the fence and goes on.
_GUARD = """\
local n = tonumber(ARGV[1])
local key = KEYS[1]
for i = 1, n do
  if tonumber(ARGV[2 * i + 1]) < tonumber(redis.call('hget', key, ARGV[2 * i]) or '0') then
    return {refused}
  end
end
for i = 1, n do
  if tonumber(ARGV[2 * i + 1]) > tonumber(redis.call('hget', key, ARGV[2 * i]) or '0') then
    redis.call('hset', key, ARGV[2 * i], ARGV[2 * i + 1])
  end
end
"""

# Replies {1, value} once the fence is recorded, {0} when refused.
READ = _GUARD.format(refused="{0}") + "return {1, redis.call('hget', key, 'value')}\n"

# ARGV as above, then the value. Replies 1 when written, 0 when refused.
WRITE = _GUARD.format(refused="0") + "redis.call('hset', key, 'value', ARGV[2 * n + 2])\nreturn 1\n"

Fence = int | Sequence[int | None]
"""``lease.fence`` of a fenced single-server (or cluster, or Sentinel) acquire, or
``lease.fences`` of a fenced Redlock acquire (one per master, None where not granted)."""


MAX_FENCE = 2**53
"""The largest fence the store compares exactly (its scripts' numbers are Lua doubles); a
counter started at the clock in microseconds (about 1.8e15) and grown by one per grant stays
below it until the year 2255."""


def _fence_args(fence: object) -> list[object]:
    if type(fence) is int:
        if not 1 <= fence <= MAX_FENCE:
            raise InvalidArgumentTypeError("fence", "must be a lease's fence: an int from 1 to 2**53")
        return [1, "fence", fence]
    names = getattr(fence, "masters", None)  # a lease's MasterFences: each master by name
    if isinstance(fence, tuple) and names is not None:
        pairs: list[object] = []
        for name, number in zip(names, fence, strict=True):
            if number is None:
                continue
            if type(number) is not int or not 1 <= number <= MAX_FENCE:
                raise InvalidArgumentTypeError("fence", "a Redlock lease's fences must be ints from 1 to "
                                                        "2**53 (None where not granted)")
            pairs += [f"fence:{name}", number]
        if pairs:
            return [len(pairs) // 2, *pairs]
    elif isinstance(fence, (tuple, list)):
        raise InvalidArgumentTypeError("fence", "a Redlock lease's fences must be passed as lease.fences "
                                                "(it names each master; numbers by position could be "
                                                "compared with another master's)")
    raise InvalidArgumentTypeError("fence", "must be a lease's fence (an int of 1 or more) or a Redlock "
                                            "lease's fences")


def _checked_key(key: object) -> str | bytes:
    if not isinstance(key, str | bytes):
        raise InvalidArgumentTypeError("key", f"must be str or bytes, not {type(key).__name__}")
    return key


def _checked_value(value: object) -> str | bytes:
    if not isinstance(value, str | bytes | int) or isinstance(value, bool):
        raise InvalidArgumentTypeError("value", f"must be str, bytes or int, not {type(value).__name__}")
    if isinstance(value, int):
        try:  # its digits here: redis-py's encoder crashed (SIGSEGV with hiredis 3) on an int too long
            return b"%d" % value
        except ValueError:
            pass  # raised below, without this error as its context
        raise InvalidArgumentError("value", f"an int of more than {sys.get_int_max_str_digits()} digits "
                                            "cannot be written (sys.set_int_max_str_digits)")
    return value


Call = tuple[list[str | bytes], list[object]]
"""A script call's keys and arguments, every one checked."""


def read_call(key: object, fence: object) -> Call:
    return [_checked_key(key)], _fence_args(fence)


def read_result(reply: list[Any], key: str | bytes, fence: Fence) -> bytes | None:
    if not reply[0]:
        raise StaleFenceError(f"fence {fence} is older than one {key!r} has seen")
    return reply[1] if len(reply) > 1 else None


def write_call(key: object, value: object, fence: object) -> Call:
    return [_checked_key(key)], [*_fence_args(fence), _checked_value(value)]


def write_calls(items: Sequence[tuple[str | bytes, str | bytes | int, Fence]]) -> list[Call]:
    """Every item's call, all checked before any is sent."""
    if isinstance(items, str | bytes) or not hasattr(items, "__iter__"):
        raise InvalidArgumentTypeError("items", f"must be a sequence of (key, value, fence) tuples, not "
                                                f"{type(items).__name__}")
    calls = []
    for item in items:
        try:
            key, value, fence = item
        except (TypeError, ValueError):
            raise InvalidArgumentTypeError("items", "each item must be a (key, value, fence) tuple") from None
        calls.append(write_call(key, value, fence))
    return calls


def write_many_result(replies: list[Any], calls: list[Call]) -> list[bool]:
    """Whether each item was written; ``FencedWriteError`` when the server refused some of them
    (the others were written: the error says which)."""
    written = [not isinstance(reply, Exception) and bool(reply) for reply in replies]
    failed = [i for i, reply in enumerate(replies) if isinstance(reply, Exception)]
    if not failed:
        return written
    # Through ReplyError: an error quoting the command's arguments back is shown without them.
    first = ReplyError(str(replies[failed[0]]))
    raise FencedWriteError(f"the server refused {len(failed)} of {len(replies)} fenced writes: {first}; "
                           "the others went through (see .written)", first.code,
                           names=[calls[i][0][0] for i in failed], written=written)


def store_client(redis: object, *, awaited: bool) -> Any:
    """``redis`` if it is a redis-py client of the store's kind (``awaited``: a ``redis.asyncio``
    one), else ``InvalidArgumentTypeError`` before anything is sent: an asyncio client's calls
    in ``FencedStore`` would return coroutines never awaited (a write said written, not run), a
    plain one's in ``AsyncFencedStore`` would block the loop and then fail though they ran."""
    execute = getattr(redis, "execute_command", None)
    if (execute is None or not hasattr(redis, "register_script")
            or isinstance(redis, Pipeline | AsyncPipeline | ClusterPipeline | AsyncClusterPipeline)):
        kinds = "redis.Redis, redis.cluster.RedisCluster or their redis.asyncio twins"
        got = type(redis).__name__
        raise InvalidArgumentTypeError("redis", f"must be a redis-py client ({kinds}), not {got}")
    if inspect.iscoroutinefunction(execute) != awaited:
        twin = ("turbolock.asyncio.AsyncFencedStore takes a redis.asyncio client" if not awaited
                else "turbolock.FencedStore takes a plain redis-py client")
        raise InvalidArgumentTypeError("redis", f"{type(redis).__name__} is the wrong kind here: {twin}")
    return redis


def pipelines_scripts(redis: Any) -> bool:
    """Whether ``redis`` pipelines script calls: redis-py's cluster clients refuse to ("Calling
    pipelined function evalsha is blocked"), so their bulk writes go one call each."""
    return not isinstance(redis, RedisCluster | AsyncRedisCluster)


def refused_or(call: Any) -> Any:
    """``call()``'s reply, or the server's refusal as a value (as a pipeline gives it)."""
    try:
        return call()
    except ResponseError as exc:
        return exc


class FencedStore:
    """Values guarded by fences, in a Redis reached through ``redis`` (a ``redis.Redis``).
    A fence is a lease's ``fence``, or a Redlock lease's ``fences`` (see ``Fence``). The asyncio
    twin is ``turbolock.asyncio.AsyncFencedStore``."""

    def __init__(self, redis: Any) -> None:
        self.redis = store_client(redis, awaited=False)
        self._read = redis.register_script(READ)
        self._write = redis.register_script(WRITE)

    def read(self, key: str | bytes, fence: Fence) -> bytes | None:
        """The value of ``key`` (None if never written), recording ``fence`` as seen;
        ``StaleFenceError`` when a higher fence has been seen."""
        keys, args = read_call(key, fence)
        return read_result(self._read(keys=keys, args=args), key, fence)

    def write(self, key: str | bytes, value: str | bytes | int, fence: Fence) -> bool:
        """Write ``value`` unless a higher fence has been seen on ``key``: whether it was written."""
        keys, args = write_call(key, value, fence)
        return bool(self._write(keys=keys, args=args))

    def write_many(self, items: Sequence[tuple[str | bytes, str | bytes | int, Fence]]) -> list[bool]:
        """``write`` for each (key, value, fence), pipelined; whether each was written.
        ``FencedWriteError`` when the server refused some (their keys in ``names``, ``written``
        saying which of the others went through)."""
        calls = write_calls(items)
        if not pipelines_scripts(self.redis):
            return write_many_result([refused_or(partial(self._write, keys=keys, args=args))
                                      for keys, args in calls], calls)
        pipe = self.redis.pipeline(transaction=False)
        for keys, args in calls:
            self._write(keys=keys, args=args, client=pipe)
        return write_many_result(pipe.execute(raise_on_error=False), calls)
