# Lock names as keys for a bulk call's checks, in one C pass. Included by _core_c.pyx; the pure
# core's twin is core_py.names_as_keys.
#
# Checking 100k names in Python (their types, encoding each, the shortest and longest) took a
# sixth of a bulk acquire's client CPU. Here each plain ASCII str is copied straight from its
# characters: no UTF-8 copy is cached on the caller's string (PyUnicode_AsUTF8 would keep one).

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_AsUTF8String

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


def names_as_keys(names, Py_ssize_t max_bytes):
    """Each name as its key (a str UTF-8 encoded, bytes as they are), or None when the caller
    must check the names one by one: one is not exactly a str or bytes, is empty, is longer than
    ``max_bytes`` encoded, or cannot be encoded, or str and bytes are mixed. A list of keys means
    every name is fine, and all are str or all bytes: distinct names are then distinct keys."""
    cdef list items = names if type(names) is list else list(names)
    cdef Py_ssize_t i, n = len(items)
    cdef list keys = PyList_New(n)
    cdef object key, name
    cdef type kind = type(items[0]) if n else str
    for i in range(n):
        name = items[i]
        key = _name_key(name, max_bytes) if type(name) is kind else None
        if key is None:
            return _unfinished(keys, i)
        Py_INCREF(key)
        PyList_SET_ITEM(keys, i, key)
    return keys


cdef object _name_key(object name, Py_ssize_t max_bytes):
    """``name``'s key, or None when ``names_as_keys`` declines it."""
    cdef Py_ssize_t size
    cdef object key
    if type(name) is str:
        if PyUnicode_IS_ASCII(name):
            size = PyUnicode_GET_LENGTH(name)
            if size == 0 or size > max_bytes:
                return None
            return PyBytes_FromStringAndSize(<char *>PyUnicode_DATA(name), size)
        try:
            key = PyUnicode_AsUTF8String(name)
        except UnicodeEncodeError:
            return None
        return key if len(<bytes>key) <= max_bytes else None
    if type(name) is bytes:
        size = len(<bytes>name)
        return name if 0 < size <= max_bytes else None
    return None


cdef object _unfinished(list keys, Py_ssize_t filled):
    """None, after giving the unset entries of ``keys`` a value: the list is freed with them."""
    cdef Py_ssize_t i
    for i in range(filled, len(keys)):
        Py_INCREF(None)
        PyList_SET_ITEM(keys, i, None)
    return None
