"""The Lua scripts behind release, extend and ownership checks, run by EVALSHA.

Each compares the stored value with the caller's token inside the server, so a lock that
expired and was taken by someone else is never deleted or extended by its old holder.
Scripts are loaded once per connection (SCRIPT LOAD) and reloaded after NOSCRIPT.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from turbolock._wire.slots import slot_base


@dataclass(frozen=True)
class Script:
    """A script of one lock key: ``EVALSHA sha n key [own keys] token [ttl_ms]``."""

    name: str
    source: bytes
    own_keys: tuple[bytes, ...] = ()
    """Suffixes of the keys the script keeps beside its lock key (a fence counter, a fair lock's
    queue), named after ``slots.slot_base(key)`` and declared after it as KEYS[2]...: on Redis
    Cluster a node whose slot is moving then answers TRYAGAIN when it holds only some of them,
    instead of running the script under ASKING on a node without them (a fresh counter there
    would hand out a fence that went backwards)."""
    shared_fence: bool = False
    """Whether its ``FENCE_SUFFIX`` own key is the counter every name of the key prefix shares
    (``fence_counter``: one server, a Sentinel's master, a Redlock master) rather than the lock
    key's own (a Redis Cluster, see ``in_slot``)."""
    sha: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source).hexdigest().encode())

    def append(self, buf: Any, key: bytes, token: bytes, ttl_ms: int | None) -> None:
        """This script's call for ``key`` (before the buffer's key prefix) onto ``buf``."""
        if self.own_keys:
            self._append_declared(buf, key, token, ttl_ms)
        else:
            buf.append_evalsha(self.sha, key, token, ttl_ms)

    def append_each(self, buf: Any, keys: Sequence[bytes], tokens: Sequence[bytes],
                    ttl_ms: int | None) -> None:
        """One call per key (``tokens[i]`` for ``keys[i]``), as ``append``."""
        if not self.own_keys:
            buf.append_evalsha_many(self.sha, keys, tokens, ttl_ms)
            return
        if len(keys) != len(tokens):
            raise ValueError("keys and tokens differ in length")
        for key, token in zip(keys, tokens, strict=True):
            self._append_declared(buf, key, token, ttl_ms)

    def _append_declared(self, buf: Any, key: bytes, token: bytes, ttl_ms: int | None) -> None:
        full = buf.key_prefix + key
        base = slot_base(full)
        args = [b"EVALSHA", self.sha, b"%d" % (1 + len(self.own_keys)), full]
        shared = fence_counter(buf.key_prefix) if self.shared_fence else b""
        args += [shared if shared and suffix == FENCE_SUFFIX else base + suffix for suffix in self.own_keys]
        args.append(token)
        if ttl_ms is not None:
            args.append(b"%d" % ttl_ms)
        buf.append_command(args)

    def in_slot(self) -> Script:
        """This script with a fence counter per lock key, in the key's cluster slot (Redis
        Cluster: keys of many slots cannot share one counter)."""
        return replace(self, name=self.name + "_in_slot", shared_fence=False)


# KEYS[1] = lock key; ARGV[1] = token. Replies 1 + the subscribers told when deleted (see
# ``released``), 0 when the lock was not ours. A release publishes on the key as a sharded
# channel: the clients' waiters of that lock are subscribed to it (``_flows.wake_book``). pcall,
# not call: a server without SPUBLISH (before Redis 7) or a user without channel permissions
# still releases; its waiters only poll.
RELEASE = Script("release", b"""\
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  local told = redis.pcall('spublish', KEYS[1], '')
  if type(told) == 'number' then
    return 1 + told
  end
  return 1
end
return 0
""")


def released(reply: object) -> bool:
    """Whether a ``RELEASE`` reply says the lock was deleted."""
    return type(reply) is int and reply >= 1

# KEYS[1] = lock key; ARGV[1] = token, ARGV[2] = ttl in ms. Replies 1 when extended, else 0.
EXTEND = Script("extend", b"""\
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
""")

# KEYS[1] = lock key; ARGV[1] = token. Replies the remaining ttl in ms when the lock is ours,
# -3 when it is not (-3 because PTTL itself uses -1 and -2).
CHECK = Script("check", b"""\
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pttl', KEYS[1])
end
return -3
""")

NOT_OURS = -3

# KEYS = lock keys; ARGV[1] = ttl in ms, ARGV[1 + i] = the token of KEYS[i]. Replies only what
# failed (see ``outcomes.failures``): i, 0 for a key not ours, or i, that key's error (a key of
# another type, an ACL refusal); one key's error never stops the others (pcall). Every key not in
# the reply was renewed. Callers keep each call near 1000 keys: a script blocks the server.
RENEW_MANY = Script("renew_many", b"""\
local call, rpcall = redis.call, redis.pcall
local ttl = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local value = rpcall('get', key)
  if type(value) == 'table' and value.err then
    out[#out + 1] = i
    out[#out + 1] = value
  elseif value == ARGV[i + 1] then
    call('pexpire', key, ttl)
  else
    out[#out + 1] = i
    out[#out + 1] = 0
  end
end
return out
""")

# RENEW_MANY for Redis Cluster, keys in ARGV: ARGV[1] = ttl in ms, ARGV[2i] = a key, ARGV[2i + 1]
# its token. Declared KEYS of different slots fail with CROSSSLOT even on one node; undeclared
# keys work across the slots a node serves. A key this node does not serve (its slot moved, or
# is moving and the key already went) is an error for redis.call, which would end the script
# half-way: pcall keeps going and answers -1 for that key, for the caller to redo it alone.
# Replies as RENEW_MANY (only what failed), with -1 for those.
RENEW_MANY_ARGV = Script("renew_many_argv", b"""\
local call = redis.call
local ttl = ARGV[1]
local out = {}
for i = 1, (#ARGV - 1) / 2 do
  local key = ARGV[2 * i]
  local value = redis.pcall('get', key)
  if type(value) == 'table' and value.err then
    out[#out + 1] = i
    out[#out + 1] = -1
  elseif value == ARGV[2 * i + 1] then
    call('pexpire', key, ttl)
  else
    out[#out + 1] = i
    out[#out + 1] = 0
  end
end
return out
""")

# A fence is the next value of a counter, a key that never expires, so fences grow across grants
# and expiries. On one server (a Sentinel's master, each Redlock master) every name under a key
# prefix draws from one counter, ``fence_counter(prefix)``: a fence is then unique as well as
# growing, and a bulk acquire draws all its fences at once (``FENCES_FOR``). On Redis Cluster a
# name's counter lives in its key's slot: the key with ':fence' after it when the key has a hash
# tag, else '{key}:fence' (the whole key as the tag; names with a '}' outside a tag are refused by
# the client, as that would move the counter to another slot). Scripts of one lock declare their
# counter (``Script.own_keys``); the claim scripts name it in ARGV, or in Lua on a cluster
# (``slot_base``: the same name). A counter that does not exist (new, deleted, evicted, a server
# restarted without persistence) starts at the server's clock in microseconds: above every fence
# it gave before, unless it gave more than a million a second on average.
FENCE_SUFFIX = b":fence"


def fence_counter(key_prefix: bytes) -> bytes:
    """The fence counter shared by every name under ``key_prefix`` on one server."""
    return b"{" + key_prefix + b"}" + FENCE_SUFFIX


SLOT_BASE = b"""\
local function slot_base(key)
  local open = string.find(key, '{', 1, true)
  local close = open and string.find(key, '}', open + 1, true)
  if open and close and close > open + 1 then
    return key
  end
  return '{' .. key .. '}'
end
"""
"""Lua: ``slot_base(key)``, what a lock key's own keys (its fence counter, a fair lock's queue)
are named after so that they share its cluster slot: the key itself when it has a hash tag,
else the key as one."""

NEXT_FENCES = b"""\
local function next_fences(counter, n)
  local value = redis.call('get', counter)
  if not value or (tonumber(value) or 1e15) < 1e15 then
    local clock = redis.call('time')
    redis.call('incrby', counter, clock[1] .. string.sub('00000' .. clock[2], -6))
  end
  return redis.call('incrby', counter, n)
end
"""
"""Lua: ``next_fences(counter, n)``, the last of ``n`` new fences from ``counter`` (the first is
that minus ``n - 1``), starting a counter that did not exist at the server's clock in
microseconds (below 2^53 until the year 2255: exact in Lua's numbers). The clock is read before
anything is written: a script is not rolled back, and a TIME refused (an ACL user without it)
after a first INCRBY left the counter at 1, counting up from there for good (found in review).
A counter below 10^15 (the clock in 2001: none this script started) is moved up by the clock as
well, so one left low that way, or an earlier build's per-name counter, goes on from above every
fence it gave. Raises what GET and INCRBY raise (a counter that is not a number, OOM)."""

TAKE_FENCE = NEXT_FENCES + b"""\
local function take_fence(key, counter)
  local ok, fence = pcall(next_fences, counter, 1)
  if ok then
    return fence
  end
  redis.call('del', key)
  if type(fence) == 'table' and fence.err then
    return fence
  end
  return redis.error_reply(tostring(fence))
end
"""
"""Lua: ``take_fence(key, counter)``, the next fence for the lock ``key`` just set; a counter
that fails (OOM, not a number) deletes that lock again and answers its error, so an error never
leaves a lock held (a fenced acquire's, a fair one's)."""

CLAIMED_FENCE = SLOT_BASE + TAKE_FENCE + b"""\
local function claimed_fence(counter, key, at)
  if counter == '' then
    counter = slot_base(key) .. '""" + FENCE_SUFFIX + b"""'
  end
  local fence = take_fence(key, counter)
  if type(fence) == 'table' then
    error({err = 'FENCE ' .. at .. ' ' .. fence.err})
  end
  return fence
end
"""
"""Lua: ``claimed_fence(counter, key, at)``, the next fence of a claim's key at 0-based position
``at``, from ``counter`` (one server's shared one), or from the key's own counter when
``counter`` is empty (a cluster): when the counter fails, the lock just set is deleted and the
script ends with ``FENCE <at> <the error>`` (``claim_error`` names that lock)."""

# KEYS[1] = lock key, KEYS[2] = its fence counter; ARGV[1] = token, ARGV[2] = ttl in ms. Takes
# the lock when it is free and replies its fence; nil when the lock is held.
FENCED_ACQUIRE = Script("fenced_acquire", TAKE_FENCE + b"""\
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
return take_fence(KEYS[1], KEYS[2])
""", own_keys=(FENCE_SUFFIX,), shared_fence=True)
"""SET NX PX and the next fence (``take_fence``). ``in_slot()`` for Redis Cluster."""

FENCED_ACQUIRE_IN_SLOT = FENCED_ACQUIRE.in_slot()
"""``FENCED_ACQUIRE`` on Redis Cluster: the counter is the lock key's own, in its slot."""

# KEYS[1] = the fence counter; ARGV[1] = how many fences. Replies the last one (see
# ``next_fences``). The first command of a fenced bulk acquire's transaction on one server
# (``_flows.fenced_batch``): the SET NX PX of every lock follows it in the same MULTI/EXEC.
FENCES_FOR = Script("fences_for", NEXT_FENCES + b"""\
return next_fences(KEYS[1], tonumber(ARGV[1]))
""")

# RELEASE for many locks in one call (a bulk release's, one server): KEYS = lock keys, ARGV[i] =
# the token of KEYS[i]. Replies only what failed (see ``outcomes.failures``): i, 0 for a key not
# ours, or i, that key's error, the others released all the same (pcall); each release publishes
# as RELEASE does. Callers keep each call near 1000 keys.
RELEASE_MANY = Script("release_many", b"""\
local call, rpcall = redis.call, redis.pcall
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local value = rpcall('get', key)
  if type(value) == 'table' and value.err then
    out[#out + 1] = i
    out[#out + 1] = value
  elseif value == ARGV[i] then
    call('del', key)
    rpcall('spublish', key, '')
  else
    out[#out + 1] = i
    out[#out + 1] = 0
  end
end
return out
""")


KEYS_PER_CALL = 1000
"""Keys per multi-key call of a bulk call (``RENEW_MANY``, ``RELEASE_MANY``, a fenced acquire's
transaction)."""

ALL = (RELEASE, EXTEND, CHECK, RENEW_MANY, RENEW_MANY_ARGV, FENCED_ACQUIRE, FENCES_FOR, RELEASE_MANY)
BY_SHA = {script.sha: script for script in ALL}
