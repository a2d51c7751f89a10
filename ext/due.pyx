# A renewer's wake-up: which of the renewal states the timer wheel found due can be sent at once.
# Included by _core_c.pyx; the pure core's twin is DueReader in _core_py.
#
# The book's general loop (renewal_book.RenewalBook.take_due) reads each lease's weak reference,
# its renewal limits and its believed expiry through Python attributes: about 330 ns a lease, a
# third of a 100k round's time before its first write. Most states are the plainest kind (no
# limit, a lease whose expiry is its slots' arithmetic); their slots are read here directly and
# the rest go back to the general loop.

import weakref

from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsDouble
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

cdef extern from "Python.h":
    PyObject* PyWeakref_GET_OBJECT(PyObject* ref)
    PyObject* Py_True  # the objects: a bare True or False here would be a C 1 or 0
    PyObject* Py_False


cdef Py_ssize_t _slot_offset(type cls, str name) except -1:
    """The offset of ``cls``'s own slot ``name`` (one of its layout: a descriptor of another
    class's slot, set as a class attribute, would be read at an offset outside the object)."""
    descriptor = getattr(cls, name, None)
    if type(descriptor) is not types.MemberDescriptorType or not issubclass(cls, descriptor.__objclass__):
        raise TypeError(f"{cls.__name__}.{name} is not a slot of its own")
    return (<PyMemberDescrObject *>descriptor).d_member.offset


cdef inline PyObject* _slot_value(object item, Py_ssize_t offset) noexcept:
    return (<PyObject **>((<char *><PyObject *>item) + offset))[0]


cdef inline bint _one_of(type cls, tuple classes) noexcept:
    """By identity: ``in`` would compare with ``==``, which a metaclass may define."""
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(classes)):
        if <PyObject *>cls == PyTuple_GET_ITEM(classes, i):
            return True
    return False


@cython.final
cdef class DueReader:
    """Splits the renewal states a wake-up found due (instances of ``state_cls``, weak
    references to their leases with slots ``released``, ``limit_reached`` and ``terms``, an
    instance of ``terms_cls`` with a slot ``limited``): ``split`` sends the leases of the plain
    ones, and leaves the others to the caller's general loop."""

    cdef type state_cls, terms_cls
    cdef tuple lease_types
    cdef Py_ssize_t released_at, limit_reached_at, terms_at, limited_at
    cdef Py_ssize_t flight_at, expires_at, acquired_at, ttl_at

    def __init__(self, type state_cls not None, type terms_cls not None, tuple lease_types not None):
        """``lease_types``: classes whose instances' expiry is their slots' arithmetic, as
        ``Lease.expires_at`` has it (``_expires``, else ``acquired_at + ttl_ms / 1000``, lowered
        by the one command in ``_flight``)."""
        self.released_at = _slot_offset(state_cls, "released")
        self.limit_reached_at = _slot_offset(state_cls, "limit_reached")
        self.terms_at = _slot_offset(state_cls, "terms")
        self.limited_at = _slot_offset(terms_cls, "limited")
        if not lease_types:
            raise TypeError("DueReader needs at least one lease type")
        base = lease_types[0]
        names = ("_flight", "_expires", "acquired_at", "ttl_ms")
        for cls in lease_types:
            if (type(cls) is not type or not issubclass(cls, base)
                    or any(getattr(cls, name, None) is not getattr(base, name, None) for name in names)):
                raise TypeError("the lease types must be classes of one slot layout")
        self.flight_at = _slot_offset(base, "_flight")
        self.expires_at = _slot_offset(base, "_expires")
        self.acquired_at = _slot_offset(base, "acquired_at")
        self.ttl_at = _slot_offset(base, "ttl_ms")
        if not issubclass(state_cls, weakref.ref):
            raise TypeError(f"{state_cls.__name__} is not a weak reference")
        self.state_cls, self.terms_cls, self.lease_types = state_cls, terms_cls, lease_types

    def split(self, list states not None, double now, double margin):
        """(leases to send, the earliest of their expiries, states left to the caller) for
        ``states`` due at ``now``: a plain state's lease is sent when its expiry less ``margin``
        is after ``now``; a state whose lease is gone or that was released is dropped; any other
        (a slot of another type, or never set) is left over, in order."""
        cdef list send = [], rest = []
        cdef double earliest = float("inf"), expiry, lowered
        cdef PyObject *lease
        cdef PyObject *terms
        cdef PyObject *slot
        cdef PyObject *flight
        cdef PyObject *acquired
        cdef object state
        for state in states:
            if type(state) is not self.state_cls:
                rest.append(state)
                continue
            lease = PyWeakref_GET_OBJECT(<PyObject *>state)
            slot = _slot_value(state, self.released_at)
            if lease == <PyObject *>None or slot == Py_True:
                continue
            terms = _slot_value(state, self.terms_at)
            if (slot != Py_False or _slot_value(state, self.limit_reached_at) != Py_False or terms == NULL
                    or type(<object>terms) is not self.terms_cls
                    or _slot_value(<object>terms, self.limited_at) != Py_False
                    or not _one_of(type(<object>lease), self.lease_types)):
                rest.append(state)
                continue
            flight = _slot_value(<object>lease, self.flight_at)  # (read as Lease.expires_at does)
            slot = _slot_value(<object>lease, self.expires_at)
            if slot == <PyObject *>None:
                acquired = _slot_value(<object>lease, self.acquired_at)
                slot = _slot_value(<object>lease, self.ttl_at)
                if (acquired == NULL or type(<object>acquired) is not float or slot == NULL
                        or type(<object>slot) is not int):
                    rest.append(state)
                    continue
                expiry = PyFloat_AS_DOUBLE(<object>acquired) + PyLong_AsDouble(<object>slot) / 1000.0
            elif slot != NULL and type(<object>slot) is float:
                expiry = PyFloat_AS_DOUBLE(<object>slot)
            else:
                rest.append(state)
                continue
            if flight != <PyObject *>None:
                if (flight == NULL or type(<object>flight) is not tuple or PyTuple_GET_SIZE(<object>flight) != 2
                        or type(<object>PyTuple_GET_ITEM(<object>flight, 1)) is not float):
                    rest.append(state)
                    continue
                lowered = PyFloat_AS_DOUBLE(<object>PyTuple_GET_ITEM(<object>flight, 1))
                if lowered < expiry:
                    expiry = lowered
            if expiry - margin <= now:  # too late to renew: the general loop says it is lost
                rest.append(state)
                continue
            send.append(<object>lease)
            if expiry < earliest:
                earliest = expiry
        return send, earliest, rest
