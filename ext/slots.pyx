# Redis Cluster key slots of many keys in one call: CRC16 (XMODEM, as binascii.crc_hqx with 0) of
# the key as sent (prefix + key), or of its hash tag, modulo 16384. Included by _core_c.pyx; the
# pure core's twin is ``_wire.slots.key_slot`` in a loop.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromLong
from cpython.ref cimport Py_INCREF

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


cdef extern from "string.h":
    const void *memchr(const void *s, int c, size_t n) nogil


cdef inline unsigned int _crc16(unsigned int crc, const unsigned char *data, Py_ssize_t size) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(size):
        crc = ((crc << 8) & 0xFFFF) ^ _crc16_table[((crc >> 8) ^ data[i]) & 0xFF]
    return crc


cdef unsigned int _slot(const unsigned char *p, Py_ssize_t prefix_size, const unsigned char *k,
                        Py_ssize_t key_size) noexcept nogil:
    # The slot of prefix + key without building it: the hash tag is what lies between the first
    # '{' and the first '}' after it, when that is not empty; else the whole of prefix + key.
    cdef const unsigned char *open_at
    cdef const unsigned char *close_at
    cdef Py_ssize_t start
    open_at = <const unsigned char *>memchr(p, 0x7B, prefix_size)  # '{'
    if open_at is not NULL:
        start = open_at - p + 1
        close_at = <const unsigned char *>memchr(open_at + 1, 0x7D, prefix_size - start)  # '}'
        if close_at is not NULL:
            if close_at > open_at + 1:
                return _crc16(0, open_at + 1, close_at - open_at - 1) & 16383
            return (_crc16(_crc16(0, p, prefix_size), k, key_size)) & 16383
        close_at = <const unsigned char *>memchr(k, 0x7D, key_size)  # the tag runs into the key
        if close_at is not NULL:
            if prefix_size - start + (close_at - k) > 0:
                return _crc16(_crc16(0, open_at + 1, prefix_size - start), k, close_at - k) & 16383
        return (_crc16(_crc16(0, p, prefix_size), k, key_size)) & 16383
    open_at = <const unsigned char *>memchr(k, 0x7B, key_size)
    if open_at is not NULL:
        start = open_at - k + 1
        close_at = <const unsigned char *>memchr(open_at + 1, 0x7D, key_size - start)
        if close_at is not NULL and close_at > open_at + 1:
            return _crc16(0, open_at + 1, close_at - open_at - 1) & 16383
    return (_crc16(_crc16(0, p, prefix_size), k, key_size)) & 16383


def key_slots(bytes prefix not None, list keys not None):
    """The cluster slot of ``prefix + key`` for each key (bytes), in order."""
    cdef const unsigned char *p = prefix
    cdef Py_ssize_t prefix_size = len(prefix), j, n = len(keys)
    cdef object key, slot
    cdef list slots = PyList_New(n)
    for j in range(n):
        key = <object>PyList_GET_ITEM(keys, j)
        if type(key) is not bytes:  # the slots not yet set are NULL: the list frees them as such
            raise TypeError(f"key_slots takes bytes keys, not {type(key).__name__}")
        slot = PyLong_FromLong(_slot(p, prefix_size, <const unsigned char *>PyBytes_AS_STRING(key),
                                     PyBytes_GET_SIZE(key)))
        Py_INCREF(slot)  # PyList_SET_ITEM takes this reference; Cython drops its own
        PyList_SET_ITEM(slots, j, slot)
    return slots
