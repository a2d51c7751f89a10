# RespParser: hiredis's RESP2 reader, with reply-object callbacks that build Python objects
# directly (the way the hiredis PyPI package's reader does). Included by _core_c.pyx.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.exc cimport PyErr_Occurred
from libc.string cimport memcmp

# The callbacks run inside hiredis and must not raise, so they use these raw forms and
# leave any Python exception set; get_replies hands it on.
cdef extern from "Python.h":
    PyObject* _new_bytes "PyBytes_FromStringAndSize"(const char*, Py_ssize_t)
    PyObject* _new_int "PyLong_FromLongLong"(long long)
    PyObject* _new_list "PyList_New"(Py_ssize_t)
    PyObject* _decode_utf8 "PyUnicode_DecodeUTF8"(const char*, Py_ssize_t, const char*)
    PyObject* _call_one "PyObject_CallOneArg"(PyObject*, PyObject*)
    int _list_append "PyList_Append"(PyObject*, PyObject*)
    void _list_set_item "PyList_SET_ITEM"(PyObject*, Py_ssize_t, PyObject*)
    PyObject* _list_get_item "PyList_GET_ITEM"(PyObject*, Py_ssize_t)
    Py_ssize_t _list_size "PyList_GET_SIZE"(PyObject*)
    void _incref "Py_INCREF"(PyObject*)
    void _decref "Py_DECREF"(PyObject*)
    void _xdecref "Py_XDECREF"(PyObject*)
    PyObject* _None "Py_None"

cdef class RespParser

cdef object _REPLY_ERROR = ReplyError
cdef bytes _OK = b"OK"
# A fenced bulk acquire's transactions answer QUEUED once per lock: one shared object, as OK.
cdef bytes _QUEUED = b"QUEUED"
cdef str _TOO_DEEP = f"No support for nested multi bulk replies with depth > {_MAX_NESTING - 1}"
# Arrays are allocated in full up to this length; a longer announced count grows the list
# as elements arrive, so a bogus count cannot make us allocate gigabytes up front.
cdef Py_ssize_t _PREALLOCATE_MAX = 1 << 16
# hiredis drops what it has read by memmove-ing everything unread to the front, every
# 1 KiB; handing it at most this much at a time keeps a big feed linear, not quadratic.
cdef Py_ssize_t _CHUNK = 16384
# hiredis 1.x's RESP3 reply types, which a RESP2 connection must never see (0.14 rejects
# their type bytes itself): type number -> type byte.
cdef dict _RESP3_TYPE_BYTES = {4: "_", 7: ",", 8: "#", 9: "%", 10: "~", 12: ">", 13: "(", 14: "="}


cdef inline void* _attach(const redisReadTask* task, PyObject* obj) noexcept:
    """Put a new reply object in its parent array; the parent takes the reference.

    A root object's reference goes to hiredis, which hands it back from GetReply (or frees
    it on error), so partly built arrays are released on every path."""
    cdef PyObject* parent
    cdef PyObject* old
    if obj is NULL:
        return NULL
    if task.parent is not NULL:
        parent = <PyObject*>task.parent.obj
        if task.idx < _list_size(parent):
            old = _list_get_item(parent, task.idx)  # the None _new_array put there
            _list_set_item(parent, task.idx, obj)
            _decref(old)
        else:
            if _list_append(parent, obj) < 0:
                _decref(obj)
                return NULL
            _decref(obj)
    return obj


cdef void* _refuse(const redisReadTask* task, str message) noexcept:
    (<RespParser>task.privdata)._callback_error = message
    return NULL


cdef void* _refuse_resp3(const redisReadTask* task) noexcept:
    byte = _RESP3_TYPE_BYTES.get(task.type, "?")
    return _refuse(task, f'Protocol error, got "{byte}" as reply type byte')


cdef void* _create_string(const redisReadTask* task, char* data, size_t size) noexcept:
    cdef PyObject* obj
    cdef PyObject* message
    if task.type == REDIS_REPLY_ERROR:
        message = _decode_utf8(data, size, "replace")
        if message is NULL:
            return NULL
        obj = _call_one(<PyObject*>_REPLY_ERROR, message)
        _decref(message)
    elif task.type == REDIS_REPLY_STATUS and size == 2 and data[0] == c"O" and data[1] == c"K":
        obj = <PyObject*>_OK
        _incref(obj)
    elif task.type == REDIS_REPLY_STATUS and size == 6 and memcmp(data, <const char*>"QUEUED", 6) == 0:
        obj = <PyObject*>_QUEUED
        _incref(obj)
    elif task.type == REDIS_REPLY_STATUS or task.type == REDIS_REPLY_STRING:
        obj = _new_bytes(data, size)
    else:
        return _refuse_resp3(task)
    return _attach(task, obj)


cdef inline bint _too_deep(const redisReadTask* task) noexcept:
    """An array header at this task's depth is one level more than MAX_NESTING allows.

    hiredis 0.14 refuses it itself (before these callbacks run); 1.x would accept it."""
    cdef Py_ssize_t depth = 0
    cdef const redisReadTask* up = task.parent
    while up is not NULL:
        depth += 1
        up = up.parent
    return depth >= _MAX_NESTING


cdef void* _create_array(const redisReadTask* task, tl_array_len count) noexcept:
    cdef Py_ssize_t size = <Py_ssize_t>count
    if task.type != REDIS_REPLY_ARRAY:
        return _refuse_resp3(task)
    if _too_deep(task):
        return _refuse(task, _TOO_DEEP)
    return _attach(task, _new_array(size if size <= _PREALLOCATE_MAX else 0))


cdef PyObject* _new_array(Py_ssize_t size) noexcept:
    """A list of ``size`` Nones, each replaced as its element arrives: a half-built array is a
    list the garbage collector tracks, and code walking its objects (gc.get_objects, memory
    profilers) would read its empty slots as NULL pointers and crash."""
    cdef PyObject* array = _new_list(size)
    cdef Py_ssize_t i
    if array is NULL:
        return NULL
    for i in range(size):
        _incref(_None)
        _list_set_item(array, i, _None)
    return array


cdef void* _create_integer(const redisReadTask* task, long long value) noexcept:
    return _attach(task, _new_int(value))


cdef void* _create_nil(const redisReadTask* task) noexcept:
    if task.type != REDIS_REPLY_STRING and task.type != REDIS_REPLY_ARRAY:
        return _refuse_resp3(task)
    if task.type == REDIS_REPLY_ARRAY and _too_deep(task):
        return _refuse(task, _TOO_DEEP)
    _incref(_None)
    return _attach(task, _None)


cdef void _free_object(void* obj) noexcept:
    _xdecref(<PyObject*>obj)


cdef redisReplyObjectFunctions _REPLY_FUNCTIONS
_REPLY_FUNCTIONS.createString = _create_string
_REPLY_FUNCTIONS.createArray = _create_array
_REPLY_FUNCTIONS.createInteger = _create_integer
_REPLY_FUNCTIONS.createNil = _create_nil
_REPLY_FUNCTIONS.freeObject = _free_object
tl_refuse_resp3(&_REPLY_FUNCTIONS, _refuse_resp3)


cdef int _raise_pending() except -1:
    """Raise the exception a callback left set (MemoryError and the like), if any."""
    return -1 if PyErr_Occurred() is not NULL else 0


@cython.final
cdef class RespParser:
    """Parses RESP2 replies fed to it in pieces of any size.

    ``get_replies()`` returns every complete reply so far, in order: bytes for simple and
    bulk strings, int, None for nil, list for arrays and ``ReplyError`` for error replies
    (returned, not raised). Bytes that are not RESP2 raise ``ProtocolError``; the parser
    then refuses all further use, so a half-parsed connection can never be reused.
    """

    cdef redisReader* _reader
    # hiredis's own cursor also moves over the finished parts of an unfinished array, so
    # the bytes no complete reply has consumed are counted here.
    cdef Py_ssize_t _unconsumed
    # Fed bytes hiredis has not been given yet (see _CHUNK).
    cdef bytearray _staged
    cdef str _broken
    cdef str _callback_error

    def __cinit__(self):
        self._reader = redisReaderCreateWithFunctions(&_REPLY_FUNCTIONS)
        if self._reader is NULL:
            raise MemoryError()
        self._reader.privdata = <void*>self
        self._staged = bytearray()

    def __dealloc__(self):
        if self._reader is not NULL:
            redisReaderFree(self._reader)

    def feed(self, data):
        cdef Py_buffer view
        if self._broken is not None:
            raise ProtocolError(self._broken)
        try:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        except BufferError:
            # A strided memoryview: TypeError, as the pure core's bytearray += raises.
            raise TypeError(f"feed takes a contiguous bytes-like object, not {type(data).__name__}") from None
        try:
            if not self._staged and <Py_ssize_t>(self._reader.len - self._reader.pos) + view.len <= _CHUNK:
                self._give(<const char*>view.buf, view.len)
            else:
                self._staged += data
            self._unconsumed += view.len
        finally:
            PyBuffer_Release(&view)

    def buffered(self):
        """Bytes fed but not yet consumed by a complete reply."""
        return self._unconsumed

    def get_replies(self, Py_ssize_t limit=-1):
        """Pop up to ``limit`` complete replies (all of them when ``limit`` < 0)."""
        cdef list out = []
        cdef Py_ssize_t count = 0
        cdef void* reply
        if self._broken is not None:
            raise ProtocolError(self._broken)
        while limit < 0 or count < limit:
            if redisReaderGetReply(self._reader, &reply) != REDIS_OK:
                self._fail()
            if reply is NULL:
                if not self._give_staged():
                    break
                continue
            obj = <object>reply
            _decref(<PyObject*>reply)  # the list below holds the reference hiredis gave us
            out.append(obj)
            count += 1
            self._unconsumed = self._reader.len - self._reader.pos + len(self._staged)
        return out

    cdef int _give(self, const char* data, Py_ssize_t size) except -1:
        if redisReaderFeed(self._reader, data, size) != REDIS_OK:
            self._fail()
        return 0

    cdef bint _give_staged(self) except -1:
        """Hand hiredis the next chunk of staged bytes; False when there are none."""
        cdef Py_ssize_t size = min(len(self._staged), _CHUNK)
        if size == 0:
            return False
        self._give(PyByteArray_AS_STRING(self._staged), size)
        del self._staged[:size]  # cheap: a bytearray drops its head by moving its start
        return True

    cdef int _fail(self) except -1:
        """hiredis refused the stream: break the parser for good and raise why."""
        if self._callback_error is not None:
            message = self._callback_error
        else:
            message = (<bytes>self._reader.errstr).decode("utf-8", "replace")
        self._broken = message
        self._unconsumed = 0
        self._staged = bytearray()
        _raise_pending()
        raise ProtocolError(message)
