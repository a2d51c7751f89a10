# Redis Cluster key slots of many keys in one call: CRC16 (XMODEM, as binascii.crc_hqx with 0) of
# the key as sent (prefix + key), or of its hash tag, modulo 16384. Included by _core_c.pyx; the
# pure core's twin is ``_wire.slots.key_slot`` in a loop.

cdef unsigned int _crc16_table[256]


cdef void _fill_crc16_table() noexcept:
    cdef unsigned int i, j, crc
    for i in range(256):
        crc = i << 8
        for j in range(8):
            if crc & 0x8000:
                crc = ((crc << 1) ^ 0x1021) & 0xFFFF
            else:
                crc = (crc << 1) & 0xFFFF
        _crc16_table[i] = crc


_fill_crc16_table()


cdef inline unsigned char _byte_at(const unsigned char *prefix, Py_ssize_t prefix_size,
                                   const unsigned char *key, Py_ssize_t i) noexcept nogil:
    # Byte i of prefix + key, without building the concatenation.
    return prefix[i] if i < prefix_size else key[i - prefix_size]


def key_slots(bytes prefix not None, list keys not None):
    """The cluster slot of ``prefix + key`` for each key (bytes), in order."""
    cdef const unsigned char *p = prefix
    cdef const unsigned char *k
    cdef Py_ssize_t prefix_size = len(prefix), total, start, stop, i, j, j2
    cdef unsigned int crc
    cdef bytes key
    cdef list slots = [0] * len(keys)
    for j in range(len(keys)):
        key = keys[j]
        k = key
        total = prefix_size + len(key)
        start, stop = 0, total
        i = 0
        while i < total and _byte_at(p, prefix_size, k, i) != 0x7B:  # '{'
            i += 1
        if i < total:
            j2 = i + 1
            while j2 < total and _byte_at(p, prefix_size, k, j2) != 0x7D:  # '}'
                j2 += 1
            if j2 < total and j2 > i + 1:
                start, stop = i + 1, j2
        crc = 0
        for i in range(start, stop):
            crc = ((crc << 8) & 0xFFFF) ^ _crc16_table[((crc >> 8) ^ _byte_at(p, prefix_size, k, i)) & 0xFF]
        slots[j] = crc & 16383
    return slots
