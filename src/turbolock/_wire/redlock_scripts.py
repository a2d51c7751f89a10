"""The Redlock extend scripts: extend where the lock is ours, and set it again where it is gone.

A master that restarted without persistence while the lock was held has lost the key; while
a majority still holds it, setting it there again is as safe as an acquire, and it keeps the
majority from thinning out one restart at a time (RedLock.net's extend does the same). Keys
set again never count towards that majority (``extend_verdict``): a lock deleted on a majority
behind its holder's back may have been someone else's since, and is lost. Callers only extend
leases with validity left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from turbolock._wire.scripts import Script

# KEYS[1] = lock key; ARGV[1] = token, ARGV[2] = ttl in ms. Replies 1 extended, 2 set again
# (the key was gone), 0 held by another token.
EXTEND = Script("redlock_extend", b"""\
local value = redis.call('get', KEYS[1])
if value == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
if not value then
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  return 2
end
return 0
""")

# KEYS = lock keys; ARGV[1] = ttl in ms, ARGV[1 + i] = the token of KEYS[i]. One reply per key,
# as EXTEND's. Callers keep each call near 1000 keys: a script blocks the server.
RENEW_MANY = Script("redlock_renew_many", b"""\
local ttl = ARGV[1]
local out = {}
for i, key in ipairs(KEYS) do
  local value = redis.call('get', key)
  if value == ARGV[i + 1] then
    out[i] = redis.call('pexpire', key, ttl)
  elseif not value then
    redis.call('set', key, ARGV[i + 1], 'px', ttl)
    out[i] = 2
  else
    out[i] = 0
  end
end
return out
""")


EXTENDED = "extended"
LOST = "lost"
UNDECIDED = "undecided"


class Tally(NamedTuple):
    """One lock's replies to an extend (or a renewal), one per master."""

    done: int
    """Masters where the key is ours now (held and extended, or set again)."""
    held: int
    """Masters that still *held* it: what a majority must be."""
    theirs: int
    """Masters where it is someone else's."""
    again: tuple[int, ...]
    """Masters where it stands only because it was set again, with no majority behind it: its
    extend (or renewal) was not decided extended. Their key is counted as set again, not held,
    until a round is (``tally``)."""

    def standing(self, masters: int) -> str:
        """For messages: where the lock stands on the ``masters``."""
        silent = masters - self.done - self.theirs
        return (f"held on {self.held}, set again on {self.done - self.held}, another's on {self.theirs}, no "
                f"answer from {silent} of {masters} masters")


def tally(replies: Sequence[object], set_again: tuple[int, ...]) -> Tally:
    """``replies`` (one per master: 1 held and extended, 2 set again, 0 another's, anything else
    no answer) counted for ``extend_verdict``. A 1 from a master in ``set_again`` (where an
    earlier round that was not decided set the key again) is still a key set again: counted as
    held, it would make a majority of a lock deleted behind its holder's back on a majority (and
    someone else's meanwhile). Masters that gave no answer join them when the round shows keys
    were lost (a key set again, or another's): their command may still run, and set the key
    again there. Without that sign they do not: a majority silent for a while (paused, cut off)
    while the others still held the lock keeps it, as nobody could take it meanwhile. What that
    leaves open: masters restarted empty, then silent in the very round that would have shown it."""
    done = held = theirs = 0
    again: list[int] = []
    silent: list[int] = []
    for m, reply in enumerate(replies):
        if reply == 1 and m not in set_again:
            done += 1
            held += 1
        elif reply == 1 or reply == 2:
            done += 1
            again.append(m)
        elif reply == 0:
            theirs += 1
        elif m in set_again:
            again.append(m)
        else:
            silent.append(m)
    if silent and (again or theirs):  # keys were lost: a silent master's command may still set one again
        again.extend(silent)
    return Tally(done, held, theirs, tuple(sorted(again)))


def extend_verdict(held: int, errored: int, quorum: int) -> str:
    """What the masters' replies to an extend (or a renewal) of one lock mean. The lock is ours
    only while a majority still *held* it (reply 1): keys set again where they were gone (2)
    keep restarted masters in step, but never make up a majority, so a lock deleted behind its
    back on a majority is lost, not brought back. Lost once even the masters that did not
    answer could not make a majority."""
    if held >= quorum:
        return EXTENDED
    if held + errored < quorum:
        return LOST
    return UNDECIDED
