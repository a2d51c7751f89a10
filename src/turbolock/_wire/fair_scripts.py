"""The scripts of a fair lock (``lock(..., fair=True)``): waiters take the lock in the order
they first asked for it, strict FIFO, among the fair waiters of a name.

Beside the lock key, a name has a queue (a sorted set: each waiter by its place, 1, 2, ...
after the last one) and when each waiter last asked (a hash of server times, in ms); both are
named after the lock key so that they share its cluster slot (``scripts.SLOT_BASE``), and both
expire once nobody asks. A waiter is the first ``WAITER_BYTES`` of its attempt's token: each
attempt has a token of its own (a lost reply's maybe-taken lock is released by that token
without touching a later attempt's), the waiter's part stays.

An attempt takes the lock only when it is free and nobody is ahead in the queue. A waiter that
stopped asking (a crash, a wait that ended without leaving) is dropped once it is at the head
and has not asked for ``PATIENCE_MS``: the lock then goes to the next one. Replies: ``OK`` (or
the fence) when taken; a negative number, minus the waiter's place, when queued; nil when a
try that does not queue found the lock held or waiters ahead.
"""

from __future__ import annotations

from turbolock._wire.scripts import NEXT_FENCE, SLOT_BASE, Script

WAITER_BYTES = 16
"""The part of a fair attempt's token that names its waiter (random, 128 bits)."""

UNKNOWN_PLACE = 1 << 62
"""A waiter's place in its client's wake-up order while the server has not told it (its first
attempt failed): after every waiter whose place is known."""

PATIENCE_MS = 3000
"""How long a waiter keeps its place without asking again. Waiters ask at least every 0.2 s
(``lock_rules.WOKEN_POLL_MAX``); a waiter at the head that stopped asking holds the others up
this long at most."""

_QUEUE = NEXT_FENCE + b"""\
local key, token = KEYS[1], ARGV[1]
local waiter = string.sub(token, 1, %(waiter)d)
local base = slot_base(key)
local queue, asked = base .. ':queue', base .. ':asked'
local clock = redis.call('time')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local head = redis.call('zrange', queue, 0, 0)[1]
while head and head ~= waiter do
  local last = tonumber(redis.call('hget', asked, head))
  if last and last + %(patience)d > now then
    break
  end
  redis.call('zrem', queue, head)
  redis.call('hdel', asked, head)
  head = redis.call('zrange', queue, 0, 0)[1]
end
"""

_TAKE = b"""\
if (not head or head == waiter) and redis.call('set', key, token, 'NX', 'PX', ARGV[2]) then
  if head then
    redis.call('zrem', queue, waiter)
    redis.call('hdel', asked, waiter)
  end
  return %(taken)s
end
"""

_JOIN = b"""\
local place = redis.call('zscore', queue, waiter)
if not place then
  local tail = redis.call('zrange', queue, -1, -1, 'WITHSCORES')[2]
  place = tail and tonumber(tail) + 1 or 1
  redis.call('zadd', queue, place, waiter)
end
redis.call('hset', asked, waiter, now)
for _, name in ipairs({queue, asked}) do
  if redis.call('pttl', name) < %(patience)d then
    redis.call('pexpire', name, %(patience)d)
  end
end
return -tonumber(place)
"""


def _source(queue: bool, fenced: bool) -> bytes:
    taken = b"next_fence(key)" if fenced else b"{ok = 'OK'}"
    values = {b"waiter": WAITER_BYTES, b"patience": PATIENCE_MS, b"taken": taken}
    body = _QUEUE + _TAKE + (_JOIN if queue else b"return false\n")
    return body % values


def _script(queue: bool, fenced: bool) -> Script:
    return Script(f"fair_{'wait' if queue else 'try'}{'_fenced' if fenced else ''}", _source(queue, fenced))


FAIR_ACQUIRE = {(queue, fenced): _script(queue, fenced)
                for queue in (False, True) for fenced in (False, True)}
"""By (queue, fenced): the attempt of a fair waiter (``queue``: it takes a place, or keeps its
own, when it cannot have the lock; a lone try does not), fenced or not. KEYS[1] = lock key;
ARGV[1] = the attempt's token, ARGV[2] = ttl in ms."""

FAIR_LEAVE = Script("fair_leave", SLOT_BASE + b"""\
local base = slot_base(KEYS[1])
local waiter = string.sub(ARGV[1], 1, %(waiter)d)
redis.call('zrem', base .. ':queue', waiter)
redis.call('hdel', base .. ':asked', waiter)
return 0
""" % {b"waiter": WAITER_BYTES})
"""A fair waiter that gives up leaves the queue. KEYS[1] = lock key; ARGV[1] = a token of the waiter."""
