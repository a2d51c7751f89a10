# A Redis Cluster bulk call's items split into each master's share and put back in input order,
# in C loops. Included by _core_c.pyx; the pure core's twins are in core_py.
#
# Done in Python these were a list index and an append per item before anything was sent and
# a store per item after every master answered: a tenth of a 100k-lock call's time, none of it
# overlapping the servers' work.

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_DECREF, Py_INCREF


def group_items(list numbers not None, list indices not None, list slots not None, Py_ssize_t groups):
    """``groups`` lists: ``indices[j]`` goes to list ``numbers[slots[j]]``, each list in input
    order. Every number must be below ``groups``."""
    cdef Py_ssize_t j, n = len(indices), number, slot, slot_count = len(numbers)
    cdef list out = [[] for _ in range(groups)]
    cdef list items
    if len(slots) != n:
        raise ValueError("group_items: indices and slots differ in length")
    for j in range(n):  # the core is built without bounds checks: every slot first, as the twin does
        slot = <Py_ssize_t>(<object>PyList_GET_ITEM(slots, j))
        if slot < 0 or slot >= slot_count:
            raise IndexError("group_items: a slot past the numbers")
    for j in range(n):
        slot = <Py_ssize_t>(<object>PyList_GET_ITEM(slots, j))
        number = <Py_ssize_t>(<object>PyList_GET_ITEM(numbers, slot))
        if number < 0 or number >= groups:
            raise ValueError("group_items: a number past the groups")
        items = <list>PyList_GET_ITEM(out, number)
        items.append(<object>PyList_GET_ITEM(indices, j))
    return out


def take_items(list source not None, list indices not None):
    """``[source[i] for i in indices]``."""
    cdef Py_ssize_t j, i, n = len(indices), size = len(source)
    cdef list out = PyList_New(n)
    cdef object item
    for j in range(n):
        i = <Py_ssize_t>(<object>PyList_GET_ITEM(indices, j))
        if i < 0 or i >= size:  # the slots not yet set are NULL: the list frees them as such
            raise IndexError("take_items: an index past the list")
        item = <object>PyList_GET_ITEM(source, i)
        Py_INCREF(item)
        PyList_SET_ITEM(out, j, item)
    return out


def put_items(list target not None, list indices not None, list values not None):
    """``target[indices[j]] = values[j]`` for every j; every index is checked before any is written."""
    cdef Py_ssize_t j, i, n = len(indices), size = len(target)
    cdef object old, value
    if len(values) != n:
        raise ValueError("put_items: indices and values differ in length")
    for j in range(n):
        i = <Py_ssize_t>(<object>PyList_GET_ITEM(indices, j))
        if i < 0 or i >= size:
            raise IndexError("put_items: an index past the list")
    for j in range(n):
        i = <Py_ssize_t>(<object>PyList_GET_ITEM(indices, j))
        value = <object>PyList_GET_ITEM(values, j)
        old = <object>PyList_GET_ITEM(target, i)
        Py_INCREF(value)
        PyList_SET_ITEM(target, i, value)
        Py_DECREF(old)  # the list's reference
        old = None  # and this one: an old item's __del__ runs here, before the size is looked at
        if PyList_GET_SIZE(target) != size:  # it changed the list: nothing written past it
            raise IndexError("put_items: the list changed size")
