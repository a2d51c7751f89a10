"""The scripts of a fair lock (``lock(..., fair=True)``): waiters take the lock in the order
they first asked for it, strict FIFO, among the fair waiters of a name.

Beside the lock key, a name has a queue (a sorted set: each waiter by its place, 1, 2, ...
after the last one) and when each waiter last asked (a hash of server times, in ms); both are
named after the lock key so that they share its cluster slot (``Script.own_keys``), and both
expire once nobody asks. A waiter is the first ``WAITER_BYTES`` of its attempt's token: each
attempt has a token of its own (a lost reply's maybe-taken lock is released by that token
without touching a later attempt's), the waiter's part stays.

An attempt takes the lock only when it is free and nobody is ahead in the queue, or when the
lock is already the waiter's own (an earlier attempt took it and its reply was lost: it is
stamped with this attempt's token and the waiter keeps its turn). A waiter that stopped asking (a
crash, a wait that ended without leaving) is dropped once it is at the head and has not asked
for ``PATIENCE_MS``: the lock then goes to the next one. Nobody is dropped for a silence nobody
could break: when no script ran on the queue for ``STALL_MS`` (a stalled or paused server, a
failover, a partition) or the server's clock went back, every waiter counts as having asked
just now. Replies: ``OK`` (or the fence) when taken; a negative number, minus the waiter's
place, when queued; nil when a try that does not queue found the lock held or waiters ahead.
"""

from __future__ import annotations

from turbolock._wire.scripts import FENCE_SUFFIX, TAKE_FENCE, Script

QUEUE_KEYS = (b":queue", b":asked")
"""The suffixes of a name's queue and of when its waiters last asked (``Script.own_keys``)."""

WAITER_BYTES = 16
"""The part of a fair attempt's token that names its waiter (random, 128 bits)."""

UNKNOWN_PLACE = 1 << 62
"""A waiter's place in its client's wake-up order while the server has not told it (its first
attempt failed): after every waiter whose place is known."""

PATIENCE_MS = 3000
"""How long a waiter keeps its place without asking again. Waiters ask at least every 0.2 s
(``lock_rules.WOKEN_POLL_MAX``); a waiter at the head that stopped asking holds the others up
this long at most, once the server and the network let the others ask."""

STALL_MS = 1000
"""A silence on a queue this long is not the waiters' doing (they ask every 0.2 s at least):
nobody is dropped for it."""

EXPIRE_MS = 30_000
"""The queue and its hash expire this long after the last script ran on them (they go at once
when the last waiter takes the lock or leaves): a partition longer than that loses the order."""

_QUEUE = b"""\
local key, token = KEYS[1], ARGV[1]
local waiter = string.sub(token, 1, %(waiter)d)
local queue, asked = KEYS[2], KEYS[3]
local clock = redis.call('time')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local holder = redis.call('get', key)
if holder and #holder == #token and string.sub(holder, 1, %(waiter)d) == waiter then
  redis.call('set', key, token, 'XX', 'PX', ARGV[2])
  redis.call('zrem', queue, waiter)
  redis.call('hdel', asked, waiter)
  if redis.call('zcard', queue) == 0 then
    redis.call('del', asked)
  end
  return %(again)s
end
local head = redis.call('zrange', queue, 0, 0)[1]
if head then
  local seen = tonumber(redis.call('hget', asked, ':seen'))
  if seen and (now - seen > %(stall)d or now < seen) then
    local fields = redis.call('hkeys', asked)
    for i = 1, #fields do
      redis.call('hset', asked, fields[i], now)
    end
  end
  redis.call('hset', asked, ':seen', now)
end
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
if (not head or head == waiter) and not holder and redis.call('set', key, token, 'NX', 'PX', ARGV[2]) then
  if head then
    redis.call('zrem', queue, waiter)
    redis.call('hdel', asked, waiter)
    if redis.call('zcard', queue) == 0 then
      redis.call('del', asked)
    end
  else
    redis.call('del', asked)
  end
  return %(taken)s
end
"""

_TRIED = b"""\
if not head then
  redis.call('del', asked)
end
return false
"""
"""A lone try that did not take the lock: ``_QUEUE`` may have dropped every place (their
waiters stopped asking), leaving the ``:seen`` it wrote with nobody waiting."""

_JOIN = b"""\
local place = redis.call('zscore', queue, waiter)
if not place then
  local tail = redis.call('zrange', queue, -1, -1, 'WITHSCORES')[2]
  place = tail and tonumber(tail) + 1 or 1
  redis.call('zadd', queue, place, waiter)
end
redis.call('hset', asked, waiter, now)
redis.call('hset', asked, ':seen', now)
redis.call('pexpire', queue, %(expire)d)
redis.call('pexpire', asked, %(expire)d)
return -tonumber(place)
"""


def _source(queue: bool, fenced: bool) -> bytes:
    # A fenced take draws the fence after the SET (``scripts.TAKE_FENCE``: a counter that fails
    # deletes the lock just set again).
    taken = b"take_fence(KEYS[1], KEYS[4])" if fenced else b"{ok = 'OK'}"
    # Its own lock again: the fence its lost take drew never reached anyone, so a new one (higher,
    # as every later fence) serves as well, from a counter shared by many names or not.
    again = taken
    values = {b"waiter": WAITER_BYTES, b"patience": PATIENCE_MS, b"stall": STALL_MS, b"expire": EXPIRE_MS,
              b"taken": taken, b"again": again}
    body = (TAKE_FENCE if fenced else b"") + _QUEUE + _TAKE + (_JOIN if queue else _TRIED)
    return body % values


def _script(queue: bool, fenced: bool) -> Script:
    own_keys = QUEUE_KEYS + ((FENCE_SUFFIX,) if fenced else ())
    return Script(f"fair_{'wait' if queue else 'try'}{'_fenced' if fenced else ''}", _source(queue, fenced),
                  own_keys, shared_fence=fenced)


FAIR_ACQUIRE = {(queue, fenced): _script(queue, fenced)
                for queue in (False, True) for fenced in (False, True)}
"""By (queue, fenced): the attempt of a fair waiter (``queue``: it takes a place, or keeps its
own, when it cannot have the lock; a lone try does not), fenced or not. KEYS[1] = lock key,
KEYS[2] its queue, KEYS[3] when its waiters asked, KEYS[4] the fence counter (fenced: see
``Script.own_keys``); ARGV[1] = the attempt's token, ARGV[2] = ttl in ms."""

FAIR_ACQUIRE_IN_SLOT = {(queue, fenced): script.in_slot() if fenced else script
                        for (queue, fenced), script in FAIR_ACQUIRE.items()}
"""``FAIR_ACQUIRE`` on Redis Cluster: a fenced attempt's counter is its lock key's own."""

FAIR_LEAVE = Script("fair_leave", b"""\
local key, queue, asked = KEYS[1], KEYS[2], KEYS[3]
local waiter = string.sub(ARGV[1], 1, %(waiter)d)
local first = redis.call('zrange', queue, 0, 0)[1] == waiter
redis.call('zrem', queue, waiter)
redis.call('hdel', asked, waiter)
local left = redis.call('zcard', queue)
if left == 0 then
  redis.call('del', asked)
end
local holder = redis.call('get', key)
if holder and #holder == %(token)d and string.sub(holder, 1, %(waiter)d) == waiter then
  redis.call('del', key)
  redis.pcall('spublish', key, '')
  return 1
end
if first and not holder and left > 0 then
  redis.pcall('spublish', key, '')
end
return 0
""" % {b"waiter": WAITER_BYTES, b"token": WAITER_BYTES + 4}, QUEUE_KEYS)
"""A fair waiter that gives up leaves the queue, and releases the lock if an attempt of its own
took it (its reply lost). A waiter first in line that leaves a free lock tells the next ones (a
release may have woken it, and only it, just as it gave up). KEYS[1] = lock key, KEYS[2] and
KEYS[3] its queue's; ARGV[1] = the waiter (or a token of it). Replies 1 when it released the
lock, else 0."""
