"""The compiled core: RESP2 encoding and parsing for lock commands, and the renewal timer wheel; no I/O.

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
    # Arrays nest at most this many levels: hiredis 0.14's reader has a stack of 9 tasks and
    # refuses an array header read at the 9th, with "depth > 7" (it counts the top level as
    # 0). The pure core refuses exactly there too; on hiredis 1.x (1024 levels) resp.pyx's
    # callbacks do, once the header line is complete.
    _MAX_NESTING = 8

MAX_NESTING = _MAX_NESTING

include "resp.pyx"
include "wire.pyx"
include "encode.pyx"
include "wheel.pyx"
include "slots.pyx"
include "shares.pyx"
include "leases.pyx"
include "names.pyx"
include "due.pyx"
