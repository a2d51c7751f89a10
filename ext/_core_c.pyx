"""The compiled core: RESP2 encoding and parsing for lock commands, with no I/O.

This is the twin of the pure-Python ``turbolock._core_py``: same names, same signatures,
same results and same errors. Parsing runs on hiredis's reader; encoding writes straight
into one buffer.
"""

cimport cython
from cpython.ref cimport PyObject

from libhiredis cimport *

from turbolock.errors import ProtocolError, ReplyError

IMPLEMENTATION = "c"

cdef enum:
    # Arrays nest at most this many levels, counted as the pure core counts them, so both
    # cores refuse the same replies (hiredis alone would allow 8 levels in 0.14, 1024 in 1.x).
    _MAX_NESTING = 7

MAX_NESTING = _MAX_NESTING

include "resp.pyx"
include "wire.pyx"
include "encode.pyx"
