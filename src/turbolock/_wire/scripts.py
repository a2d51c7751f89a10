"""The Lua scripts behind release, extend and ownership checks, run by EVALSHA.

Each compares the stored value with the caller's token inside the server, so a lock that
expired and was taken by someone else is never deleted or extended by its old holder.
Scripts are loaded once per connection (SCRIPT LOAD) and reloaded after NOSCRIPT.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
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
        args += [base + suffix for suffix in self.own_keys]
        args.append(token)
        if ttl_ms is not None:
            args.append(b"%d" % ttl_ms)
        buf.append_command(args)


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

# A fence is the next value of the name's counter, a key that never expires, so fences grow
# across grants and expiries. The counter lives in the lock key's cluster slot: the key with
# ':fence' after it when the key has a hash tag, else '{key}:fence' (the whole key as the tag;
# names with a '}' outside a tag are refused by the client, as that would move the counter to
# another slot). Scripts of one lock declare it (``Script.own_keys``); the bulk and claim scripts,
# whose keys go in ARGV or span slots, name it in Lua (``slot_base``: the same name).
FENCE_SUFFIX = b":fence"

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

NEXT_FENCE = SLOT_BASE + b"""\
local function next_fence(key)
  return redis.call('incr', slot_base(key) .. '""" + FENCE_SUFFIX + b"""')
end
local function claimed_fence(key, at)
  local ok, fence = pcall(next_fence, key)
  if ok then
    return fence
  end
  redis.call('del', key)
  local message = type(fence) == 'table' and fence.err or tostring(fence)
  error({err = 'FENCE ' .. at .. ' ' .. message})
end
"""
"""Lua: ``next_fence(key)``, the next value of a lock key's fence counter (for the scripts that
take many fenced locks: the bulk acquire's and the claims'); ``claimed_fence(key, at)`` the same for a claim's
key at 0-based position ``at``: when the counter fails, the lock just set is deleted and the
script ends with ``FENCE <at> <the error>`` (``claim_error`` names that lock)."""

# KEYS[1] = lock key, KEYS[2] = its fence counter; ARGV[1] = token, ARGV[2] = ttl in ms. Takes
# the lock when it is free and replies its fence; nil when the lock is held.
FENCED_ACQUIRE = Script("fenced_acquire", b"""\
local key = KEYS[1]
if not redis.call('set', key, ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
local ok, fence = pcall(redis.call, 'incr', KEYS[2])
if ok then
  return fence
end
redis.call('del', key)
if type(fence) == 'table' and fence.err then
  return fence
end
return redis.error_reply(tostring(fence))
""", own_keys=(FENCE_SUFFIX,))
"""SET NX PX and the key's next fence; a counter that fails (OOM, not a number) deletes the
lock again and answers its error, so an error never leaves a lock held (as the bulk script)."""

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

# FENCED_ACQUIRE for many locks in one call (a bulk acquire's, one server): KEYS = lock keys;
# ARGV[1] = ttl in ms, ARGV[1 + i] = the token of KEYS[i]. Replies one entry per key: its fence,
# nil when it is held, or that key's error (OOM, a counter that is not a number...), the others
# going on (pcall): a key whose lock was set but whose counter failed is deleted again, so an
# error never leaves a lock behind. Callers keep each call near 1000 keys (a script blocks the
# server).
FENCED_ACQUIRE_MANY = Script("fenced_acquire_many", NEXT_FENCE + b"""\
local rpcall = redis.pcall
local ttl = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local set = rpcall('set', key, ARGV[i + 1], 'NX', 'PX', ttl)
  if type(set) == 'table' and set.err then
    out[i] = set
  elseif set then
    local ok, fence = pcall(next_fence, key)
    if ok then
      out[i] = fence
    else
      redis.call('del', key)
      if type(fence) == 'table' and fence.err then
        out[i] = fence
      else
        out[i] = redis.error_reply(tostring(fence))
      end
    end
  else
    out[i] = false
  end
end
return out
""")


KEYS_PER_CALL = 1000
"""Keys per multi-key script call of a bulk call (``FENCED_ACQUIRE_MANY``, ``RENEW_MANY``,
``RELEASE_MANY``)."""

ALL = (RELEASE, EXTEND, CHECK, RENEW_MANY, RENEW_MANY_ARGV, FENCED_ACQUIRE, FENCED_ACQUIRE_MANY,
       RELEASE_MANY)
BY_SHA = {script.sha: script for script in ALL}
