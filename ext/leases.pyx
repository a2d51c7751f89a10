# A bulk acquire's leases: built without running their __init__, and taken out of the cycle
# collector's sight. Included by _core_c.pyx; the pure core's twins are in _core_py.
#
# Building 100k leases through Lease.__init__ (thirteen attribute stores each) took about half
# of the client's CPU per lock; writing the slots directly takes a tenth of that. The leases are
# the same objects either way (tests/core compares them slot by slot).
#
# A lease tracked by the collector triggers its young collections and is walked again in every
# older one (a third of the client's CPU per lock). A lease that cannot be part of a reference
# cycle needs none of that: its memory still goes with its last reference. A lease reaches user
# code (and back) through an auto-renewal's on_lost callback, a name of a str or bytes subclass
# (it has a __dict__) and its ``lost`` event: only leases without renewal, of plain str or bytes
# names, are untracked (bulk_plan), and ``Lease.lost`` tracks its lease again.

cimport cython
from cpython.object cimport PyTypeObject
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF

import types

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    void PyObject_GC_Track(void *op)
    int PyObject_GC_IsTracked(object op)
    object PyType_GenericAlloc(PyTypeObject *type, Py_ssize_t nitems)
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

cdef enum:
    _MAX_LEASE_SLOTS = 32


def track(object item):
    """Let the cycle collector track ``item`` again (a lease that now holds an object user code
    can reach: its ``lost`` event)."""
    if not PyObject_GC_IsTracked(item) and type(item).__flags__ & (1 << 14):  # Py_TPFLAGS_HAVE_GC
        PyObject_GC_Track(<void *>item)


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


def set_slot(list objects not None, object descriptor, object value):
    """Write ``value`` into the slot ``descriptor`` (a class's member descriptor, such as
    ``Lease._expires``) of every object: a bulk release's leases, told they were released. Every
    object's type is checked before any is written."""
    if type(descriptor) is not types.MemberDescriptorType:
        raise TypeError("set_slot takes a slot's member descriptor")
    cdef type owner = descriptor.__objclass__
    cdef Py_ssize_t offset = (<PyMemberDescrObject *>descriptor).d_member.offset
    cdef object item
    cdef char *base
    cdef PyObject *old
    for item in objects:
        if not isinstance(item, owner):
            raise TypeError(f"set_slot: {type(item).__name__} has no slot of {owner.__name__}")
    for item in objects:
        base = <char *><PyObject *>item
        old = (<PyObject **>(base + offset))[0]
        Py_INCREF(value)
        (<PyObject **>(base + offset))[0] = <PyObject *>value
        Py_XDECREF(old)


def slots_of(type cls not None):
    """Every slot of ``cls`` and its bases that holds a value (not ``__weakref__``/``__dict__``)."""
    found = set()
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        found.update((slots,) if isinstance(slots, str) else slots)
    found.difference_update(("__weakref__", "__dict__"))
    return found


@cython.final
cdef class LeaseMaker:
    """Makes instances of ``cls`` whose slots ``values`` come from the arguments of ``make`` and
    whose slots ``empty`` are None, for a class whose ``__init__`` does exactly that with
    ``values`` as its arguments, in that order."""

    cdef object cls
    cdef Py_ssize_t offsets[_MAX_LEASE_SLOTS]
    cdef Py_ssize_t nvalues, nempty
    cdef Py_ssize_t name_at, token_at, owner_at  # offsets of those slots, -1 when none
    cdef bint collected  # instances have a cycle collector's header (only those can be untracked)

    def __init__(self, type cls not None, tuple values not None, tuple empty not None):
        cdef Py_ssize_t i
        named = values + empty
        if slots_of(cls) != set(named) or len(set(named)) != len(named):
            raise TypeError(f"{cls.__name__}'s slots are {sorted(slots_of(cls))}, not {sorted(named)}")
        if len(named) > _MAX_LEASE_SLOTS:
            raise ValueError("too many slots")
        if cls.__dictoffset__ != 0 or not (cls.__flags__ & (1 << 9)):  # slots only, a heap type
            raise TypeError(f"{cls.__name__} must be a class with __slots__ only")
        for i, name in enumerate(named):
            descriptor = getattr(cls, name)
            if type(descriptor) is not types.MemberDescriptorType:
                raise TypeError(f"{cls.__name__}.{name} is not a slot")
            self.offsets[i] = (<PyMemberDescrObject *>descriptor).d_member.offset
        self.name_at = self.token_at = self.owner_at = -1
        for i, name in enumerate(named):
            if name == "_name":
                self.name_at = self.offsets[i]
            elif name == "token":
                self.token_at = self.offsets[i]
            elif name == "owner":
                self.owner_at = self.offsets[i]
        self.cls = cls
        self.nvalues = len(values)
        self.nempty = len(empty)
        self.collected = (cls.__flags__ & (1 << 14)) != 0  # Py_TPFLAGS_HAVE_GC

    def make(self, list out not None, Py_ssize_t start, tuple columns not None, Py_ssize_t first,
             Py_ssize_t count, tuple shared not None, bint untracked=False):
        """``out[start + i]`` = an instance whose values are each column's item ``first + i``,
        then ``shared``, for i in 0..count-1; ``untracked``: each out of the cycle collector's
        sight as soon as it is made (``untrack`` after the loop would leave the collections
        that 100k allocations set off to walk every lease made so far: a third of the cost)."""
        cdef Py_ssize_t i, j, ncolumns = len(columns), nshared = len(shared)
        cdef list column
        cdef object lease, value
        cdef char *base
        untracked = untracked and self.collected
        if ncolumns + nshared != self.nvalues:
            raise ValueError(f"{ncolumns} columns and {nshared} shared values for {self.nvalues} slots")
        # Compared by subtraction: ``start + count`` could overflow.
        if count < 0 or start < 0 or first < 0 or start > len(out) or count > len(out) - start:
            raise IndexError("make range out of the list")
        for j in range(ncolumns):
            if (type(columns[j]) is not list or first > len(<list>columns[j])
                    or count > len(<list>columns[j]) - first):
                raise IndexError("a column is not a list that long")
        # The columns' items taken first, as the pure core does: Python code may run in the loop
        # (an old item's __del__, a collection set off by an allocation) and change the lists.
        columns = tuple([(<list>columns[j])[first:first + count] for j in range(ncolumns)])
        first = 0
        for i in range(count):
            if len(out) - start < count:  # shrunk by such code: nothing written past it
                raise IndexError("the list changed size while leases were made")
            lease = PyType_GenericAlloc(<PyTypeObject *>self.cls, 0)
            if untracked:
                PyObject_GC_UnTrack(<void *>lease)
            base = <char *><void *>lease
            for j in range(ncolumns):
                column = <list>columns[j]
                value = column[first + i]
                Py_INCREF(value)
                (<void **>(base + self.offsets[j]))[0] = <void *>value
            for j in range(nshared):
                value = shared[j]
                Py_INCREF(value)
                (<void **>(base + self.offsets[ncolumns + j]))[0] = <void *>value
            for j in range(self.nempty):
                Py_INCREF(None)
                (<void **>(base + self.offsets[self.nvalues + j]))[0] = <void *>None
            out[start + i] = lease

    def columns(self, leases not None, owner, Py_ssize_t max_bytes):
        """(keys, tokens) of ``leases`` in one pass, when each is exactly an instance of this
        maker's class whose ``owner`` slot is ``owner`` and whose name ``names_as_keys`` takes
        (all str or all bytes); None sends the caller to its checks one by one."""
        cdef list items = leases if type(leases) is list else list(leases)
        cdef Py_ssize_t i, n = len(items)
        cdef list keys, tokens
        cdef object lease, key
        cdef PyObject *name
        cdef PyObject *token
        cdef char *base
        cdef object kind = None  # the names' one type: str and bytes mixed are declined (names_as_keys)
        if self.name_at < 0 or self.token_at < 0 or self.owner_at < 0:
            raise TypeError(f"{self.cls.__name__} has no _name, token and owner slots")
        keys, tokens = PyList_New(n), PyList_New(n)
        for i in range(n):
            lease = items[i]
            if type(lease) is not self.cls:
                return _unfinished_pair(keys, tokens, i)
            base = <char *><void *>lease
            name = (<PyObject **>(base + self.name_at))[0]
            token = (<PyObject **>(base + self.token_at))[0]
            if (<PyObject **>(base + self.owner_at))[0] != <PyObject *>owner or name == NULL or token == NULL:
                return _unfinished_pair(keys, tokens, i)
            if kind is None:
                kind = type(<object>name)
            key = _name_key(<object>name, max_bytes) if type(<object>name) is kind else None
            if key is None:
                return _unfinished_pair(keys, tokens, i)
            Py_INCREF(key)
            PyList_SET_ITEM(keys, i, key)
            Py_INCREF(<object>token)
            PyList_SET_ITEM(tokens, i, <object>token)
        return keys, tokens


cdef object _unfinished_pair(list keys, list tokens, Py_ssize_t filled):
    _unfinished(keys, filled)
    _unfinished(tokens, filled)
    return None
