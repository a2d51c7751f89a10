# RESP2 writing primitives for the encoder: each writes at p and returns the new end.
# The caller has reserved room; none of them can fail. Included by _core_c.pyx.

from libc.string cimport memcpy

cdef extern from "Python.h":
    char* _bytes_data "PyBytes_AS_STRING"(PyObject*)
    Py_ssize_t _bytes_size "PyBytes_GET_SIZE"(PyObject*)

cdef enum:
    # The longest "$<digits>\r\n" length prefix.
    _MAX_LENGTH_PREFIX = 1 + 20 + 2

cdef const char* _DIGIT_PAIRS = (
    b"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    b"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    b"8081828384858687888990919293949596979899"
)


cdef inline Py_ssize_t _bulk_room(Py_ssize_t size) noexcept:
    """Room a bulk string of ``size`` bytes may take, prefix and CRLF included."""
    return _MAX_LENGTH_PREFIX + size + 2


cdef inline char* _put(char* p, const char* data, Py_ssize_t size) noexcept:
    memcpy(p, data, size)
    return p + size


cdef inline char* _put_bytes(char* p, PyObject* data) noexcept:
    return _put(p, _bytes_data(data), _bytes_size(data))


cdef inline char* _put_crlf(char* p) noexcept:
    p[0] = c"\r"
    p[1] = c"\n"
    return p + 2


cdef inline char* _put_decimal(char* p, unsigned long long value) noexcept:
    # Two digits per division: lengths and TTLs are formatted once per command.
    cdef char digits[20]
    cdef char* start = digits + 20
    cdef unsigned long long pair
    if value < 10:
        p[0] = <char>(c"0" + value)
        return p + 1
    while value >= 100:
        pair = (value % 100) * 2
        value //= 100
        start -= 2
        start[0] = _DIGIT_PAIRS[pair]
        start[1] = _DIGIT_PAIRS[pair + 1]
    if value >= 10:
        start -= 2
        start[0] = _DIGIT_PAIRS[value * 2]
        start[1] = _DIGIT_PAIRS[value * 2 + 1]
    else:
        start -= 1
        start[0] = <char>(c"0" + value)
    return _put(p, start, digits + 20 - start)


cdef inline char* _put_length(char* p, char kind, Py_ssize_t value) noexcept:
    """``$<value>\\r\\n``, or ``*<value>\\r\\n`` for an array header."""
    p[0] = kind
    return _put_crlf(_put_decimal(p + 1, <unsigned long long>value))


cdef inline char* _put_bulk(char* p, PyObject* data) noexcept:
    p = _put_length(p, c"$", _bytes_size(data))
    return _put_crlf(_put_bytes(p, data))
