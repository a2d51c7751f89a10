"""Redis Cluster's key slots: CRC16 (CCITT, XMODEM: ``binascii.crc_hqx`` with 0, a C function in
the standard library, the same one redis-py uses) of the key, or of its hash tag, modulo 16384.

The hash tag is what lies between the first ``{`` and the first ``}`` after it, when that is
not empty: ``{user:1}:a`` and ``{user:1}:b`` share a slot, ``{}x`` hashes whole.
"""

from __future__ import annotations

from binascii import crc_hqx

SLOTS = 16384


def key_slot(key: bytes) -> int:
    """The cluster slot of ``key`` (already prefixed and encoded, as it is sent)."""
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc_hqx(key, 0) & (SLOTS - 1)


def slot_base(key: bytes) -> bytes:
    """What a lock key's own keys (its fence counter, a fair lock's queue) are named after, so
    that they share its slot: the key itself when it has a hash tag, else the key as one. The
    twin of ``scripts.SLOT_BASE`` (scripts that name them in Lua): both must give the same names."""
    start = key.find(b"{")
    if start != -1 and key.find(b"}", start + 1) > start + 1:
        return key
    return b"{" + key + b"}"
