# Taking many small objects out of the cycle collector's sight. Included by _core_c.pyx; the pure
# core's twin (``_core_py.untrack``) does nothing.
#
# A bulk acquire of 100k locks makes 100k leases, each tracked by the collector: they trigger its
# young collections and are walked again in every older one, which cost about a third of the
# client's CPU per lock. A lease that cannot be part of a reference cycle needs none of that: its
# memory still goes with its last reference. A lease can reach user code (and back) only through
# an auto-renewal's on_lost callback, so only leases without renewal are untracked (bulk_plan).

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    int PyObject_GC_IsTracked(object op)


def untrack(list objects not None, Py_ssize_t start, Py_ssize_t stop):
    """Stop the cycle collector tracking ``objects[start:stop]`` (None entries are skipped)."""
    cdef Py_ssize_t i, size = len(objects)
    cdef object item
    if start < 0 or stop > size or start > stop:
        raise IndexError("untrack range out of the list")
    for i in range(start, stop):
        item = objects[i]
        if item is not None and PyObject_GC_IsTracked(item):
            PyObject_GC_UnTrack(<void *>item)
