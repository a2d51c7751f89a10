# TimerWheel: the hashed timer wheel of held-lock ids, in C structs. Included by _core_c.pyx.
#
# The twin of turbolock._wheel_py.TimerWheel (whose docstring gives the semantics): same
# results, same errors. Scheduled ids live in one pool of 24-byte entries; each slot (and the
# overdue list) is an intrusive doubly-linked list of pool indices, and an open-addressing
# table of int32 pool indices (Fibonacci hashing, linear probing, backward-shift deletion, at
# most 2/3 full) finds an id's entry. The pool grows by half, so an id costs 32 to 58 bytes
# (measured: about 45 on average); the pool shrinks again when mostly empty. Memory is
# PyMem_*, which tracemalloc sees.

from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_Check, PyLong_FromLongLong
from cpython.ref cimport Py_INCREF
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.math cimport INFINITY, ceil, floor, nextafter
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memset

import operator as _operator

cdef extern from "Python.h":
    long long _as_long_long "PyLong_AsLongLongAndOverflow"(object, int*) except? -1

ctypedef struct _Entry:
    int64_t id  # 0 while the entry is free
    int64_t due
    int32_t prev  # -1: first of its list
    int32_t next  # -1: last of its list; for a free entry, the next free one

ctypedef struct _Fired:
    int64_t due
    int64_t id

cdef enum:
    _NONE = -1
    _MIN_POOL = 64
    # Shrink only a pool at least this big, so a wheel that idles near empty stays put.
    _SHRINK_FROM = 4096
    _MAX_POOL = 1 << 29
    _MAX_SLOTS = 1 << 20

# Tick numbers are int64s; within 2**53 of 0 every one is also exactly a double.
cdef double _TICK_LIMIT = 9007199254740992.0  # 2**53
cdef uint64_t _GOLDEN = 0x9E3779B97F4A7C15ULL


cdef int _compare_fired(const void* a, const void* b) noexcept nogil:
    cdef const _Fired* x = <const _Fired*>a
    cdef const _Fired* y = <const _Fired*>b
    if x.due != y.due:
        return -1 if x.due < y.due else 1
    if x.id != y.id:
        return -1 if x.id < y.id else 1
    return 0


cdef inline bint _valid_id(object item_id, int64_t* out) except -1:
    """Whether ``item_id`` is an int that can be scheduled (1 .. 2**63 - 1); its value in out."""
    cdef int overflow = 0
    cdef long long value
    if not PyLong_Check(item_id):
        return False
    value = _as_long_long(item_id, &overflow)
    if overflow or value < 1:
        return False
    out[0] = value
    return True


cdef inline double _seconds(object value) except? -1.0:
    """PyFloat_AsDouble, as the pure wheel's float conversion does (same errors)."""
    cdef double result = value
    return result


cdef inline int64_t _floor_tick(double now, double tick) except? -1:
    cdef double q = now / tick
    if not (-_TICK_LIMIT < q < _TICK_LIMIT):
        raise ValueError("now must be finite and within 2**53 ticks of 0")
    return <int64_t>floor(q)


@cython.final
cdef class TimerWheel:
    """A hashed timer wheel of integer ids; see turbolock._wheel_py.TimerWheel."""

    cdef readonly double tick
    cdef int64_t _current
    cdef int64_t _mask
    cdef Py_ssize_t _count
    cdef int32_t* _heads  # one list per slot, then the overdue list
    cdef _Entry* _pool
    cdef int32_t _pool_size
    cdef int32_t _free
    cdef int32_t* _table
    cdef uint64_t _table_mask
    cdef int _table_shift

    def __cinit__(self):
        self._free = _NONE

    def __init__(self, tick, slots, now):
        cdef double seconds = _seconds(tick)
        cdef int64_t current
        cdef int32_t* heads
        if not (seconds > 0 and seconds < INFINITY):
            raise ValueError("tick must be a positive, finite number of seconds")
        slots = _operator.index(slots)
        if slots < 1 or slots & (slots - 1):
            raise ValueError("slots must be a positive power of two")
        if slots > _MAX_SLOTS:
            raise ValueError("slots must be at most 2**20")
        current = _floor_tick(_seconds(now), seconds)
        heads = <int32_t*>PyMem_Malloc((<Py_ssize_t>slots + 1) * sizeof(int32_t))
        if heads is NULL:
            raise MemoryError()
        memset(heads, 0xFF, (<Py_ssize_t>slots + 1) * sizeof(int32_t))
        # (A second __init__ starts an empty wheel, as it does in the pure core.)
        PyMem_Free(self._heads)
        PyMem_Free(self._pool)
        PyMem_Free(self._table)
        self._heads = heads
        self._pool = NULL
        self._table = NULL
        self._pool_size = 0
        self._count = 0
        self._mask = slots - 1
        self.tick = seconds
        self._current = current
        self._resize(_MIN_POOL)

    def __dealloc__(self):
        PyMem_Free(self._heads)
        PyMem_Free(self._pool)
        PyMem_Free(self._table)

    def __len__(self):
        return self._count

    def __contains__(self, item_id):
        cdef int64_t key
        if self._table is NULL or not _valid_id(item_id, &key):
            return False
        return self._table[self._probe(key)] != _NONE

    def schedule(self, item_id, when):
        """Make ``item_id`` due at ``when`` (replacing any earlier schedule of the same id)."""
        cdef int64_t key
        cdef int64_t due
        cdef double w, q
        cdef Py_ssize_t at
        cdef int32_t index
        self._check_ready()
        if not _valid_id(item_id, &key):
            if not isinstance(item_id, int):
                raise TypeError(f"item_id must be an int, not {type(item_id).__name__}")
            raise ValueError("item_id must be between 1 and 2**63 - 1")
        w = _seconds(when)
        q = w / self.tick
        if not (-_TICK_LIMIT < q < _TICK_LIMIT):
            raise ValueError("when must be finite and within 2**53 ticks of 0")
        # The first tick whose every time is at or after when (see _wheel_py._due_tick).
        due = <int64_t>ceil(q)
        if <double>due == q and nextafter(w, -INFINITY) / self.tick >= q:
            due += 1
        at = self._probe(key)
        index = self._table[at]
        if index != _NONE:
            self._unlink(index)
        else:
            if self._free == _NONE:
                self._resize(self._pool_size + self._pool_size // 2)
                at = self._probe(key)
            index = self._free
            self._free = self._pool[index].next
            self._pool[index].id = key
            self._table[at] = index
            self._count += 1
        self._pool[index].due = due
        self._link(index)

    def cancel(self, item_id):
        """Unschedule ``item_id``; False when it was not scheduled."""
        cdef int64_t key
        cdef Py_ssize_t at
        if self._table is NULL or not _valid_id(item_id, &key):
            return False
        at = self._probe(key)
        if self._table[at] == _NONE:
            return False
        self._release(at)
        self._maybe_shrink()
        return True

    def advance(self, now):
        """Every id due at or before ``now``, sorted by (due tick, id); they are unscheduled."""
        cdef int64_t target, first = 1, last = 0, due_by, tick_no
        cdef Py_ssize_t n, i
        cdef _Fired* fired
        cdef list out
        self._check_ready()
        target = _floor_tick(_seconds(now), self.tick)
        if target <= self._current:
            if self._heads[self._mask + 1] == _NONE:
                return []
            due_by = self._current  # only the overdue list to visit
        elif self._count == 0:
            self._current = target
            return []
        else:
            due_by = target
            # A jump longer than one turn visits every slot once, not every tick in between.
            first = self._current + 1 if target - self._current <= self._mask + 1 else target - self._mask
            last = target
        # Count, then collect and build the reply; the wheel changes only once nothing can
        # fail any more, so a MemoryError leaves it as it was.
        n = self._walk(self._mask + 1, due_by, NULL)
        for tick_no in range(first, last + 1):
            n += self._walk(tick_no & self._mask, due_by, NULL)
        if n == 0:
            self._current = due_by
            return []
        fired = <_Fired*>PyMem_Malloc(n * sizeof(_Fired))
        if fired is NULL:
            raise MemoryError()
        try:
            i = self._walk(self._mask + 1, due_by, fired)
            for tick_no in range(first, last + 1):
                i += self._walk(tick_no & self._mask, due_by, fired + i)
            qsort(fired, n, sizeof(_Fired), _compare_fired)
            out = PyList_New(n)
            for i in range(n):
                item = PyLong_FromLongLong(fired[i].id)
                Py_INCREF(item)
                PyList_SET_ITEM(out, i, item)
            for i in range(n):
                self._release(self._probe(fired[i].id))
        finally:
            PyMem_Free(fired)
        self._current = due_by
        self._maybe_shrink()
        return out

    def next_due(self):
        """The earliest time anything is due, or None when empty (O(n); for idle waits only)."""
        cdef int32_t i
        cdef int64_t best = 0
        cdef bint found = False
        for i in range(self._pool_size):
            if self._pool[i].id != 0 and (not found or self._pool[i].due < best):
                best = self._pool[i].due
                found = True
        return <double>best * self.tick if found else None

    # -- the structures -----------------------------------------------------------------------

    cdef int _check_ready(self) except -1:
        if self._table is NULL:
            raise TypeError("TimerWheel.__init__ was not called")
        return 0

    cdef inline Py_ssize_t _probe(self, int64_t key) noexcept:
        """The table position holding ``key``'s entry, or the empty one where it would go."""
        cdef uint64_t at = (<uint64_t>key * _GOLDEN) >> self._table_shift
        cdef int32_t index
        while True:
            index = self._table[at]
            if index == _NONE or self._pool[index].id == key:
                return <Py_ssize_t>at
            at = (at + 1) & self._table_mask

    cdef inline int32_t* _head(self, int64_t due) noexcept:
        if due <= self._current:
            return &self._heads[self._mask + 1]
        return &self._heads[due & self._mask]

    cdef inline void _link(self, int32_t index) noexcept:
        cdef int32_t* head = self._head(self._pool[index].due)
        self._pool[index].prev = _NONE
        self._pool[index].next = head[0]
        if head[0] != _NONE:
            self._pool[head[0]].prev = index
        head[0] = index

    cdef inline void _unlink(self, int32_t index) noexcept:
        cdef _Entry* entry = &self._pool[index]
        if entry.prev != _NONE:
            self._pool[entry.prev].next = entry.next
        else:
            self._head(entry.due)[0] = entry.next
        if entry.next != _NONE:
            self._pool[entry.next].prev = entry.prev

    cdef void _release(self, Py_ssize_t at) noexcept:
        """Unschedule the entry at table position ``at``: unlink it, free it, close the gap."""
        cdef int32_t index = self._table[at]
        cdef uint64_t hole = <uint64_t>at, probe = <uint64_t>at, home
        self._unlink(index)
        self._pool[index].id = 0
        self._pool[index].next = self._free
        self._free = index
        self._count -= 1
        # Backward-shift deletion: pull later entries of the probe run into the hole, so
        # lookups never need tombstones.
        while True:
            probe = (probe + 1) & self._table_mask
            index = self._table[probe]
            if index == _NONE:
                break
            home = (<uint64_t>self._pool[index].id * _GOLDEN) >> self._table_shift
            if ((probe - home) & self._table_mask) >= ((probe - hole) & self._table_mask):
                self._table[hole] = index
                hole = probe
        self._table[hole] = _NONE

    cdef Py_ssize_t _walk(self, int64_t list_no, int64_t due_by, _Fired* out) noexcept:
        """Count (and copy into ``out``, if given) the entries of one list due by ``due_by``."""
        cdef int32_t index = self._heads[list_no]
        cdef Py_ssize_t n = 0
        while index != _NONE:
            if self._pool[index].due <= due_by:
                if out is not NULL:
                    out[n].due = self._pool[index].due
                    out[n].id = self._pool[index].id
                n += 1
            index = self._pool[index].next
        return n

    cdef void _maybe_shrink(self) noexcept:
        """Halve a mostly empty pool; on MemoryError keep the big one (nothing is lost)."""
        if self._pool_size >= _SHRINK_FROM and self._count * 8 < self._pool_size:
            try:
                self._resize(self._pool_size // 2)
            except MemoryError:
                pass

    cdef int _resize(self, Py_ssize_t size) except -1:
        """Move every entry into a fresh pool of ``size``, and a table at most 2/3 full."""
        cdef _Entry* pool
        cdef int32_t* table
        cdef Py_ssize_t table_size, list_no
        cdef int32_t old, new = 0, last
        cdef int bits = 0
        if size > _MAX_POOL:
            raise MemoryError("TimerWheel: too many ids scheduled")
        while (<Py_ssize_t>1 << bits) * 2 < size * 3:
            bits += 1
        table_size = <Py_ssize_t>1 << bits
        pool = <_Entry*>PyMem_Malloc(size * sizeof(_Entry))
        table = <int32_t*>PyMem_Malloc(table_size * sizeof(int32_t))
        if pool is NULL or table is NULL:
            PyMem_Free(pool)
            PyMem_Free(table)
            raise MemoryError()
        memset(table, 0xFF, table_size * sizeof(int32_t))
        # Walk every list, copying its entries to the front of the new pool in order.
        for list_no in range(self._mask + 2):
            old = self._heads[list_no]
            last = _NONE
            if old != _NONE:
                self._heads[list_no] = new
            while old != _NONE:
                pool[new].id = self._pool[old].id
                pool[new].due = self._pool[old].due
                pool[new].prev = last
                pool[new].next = _NONE
                if last != _NONE:
                    pool[last].next = new
                last = new
                new += 1
                old = self._pool[old].next
        PyMem_Free(self._pool)
        PyMem_Free(self._table)
        self._pool = pool
        self._pool_size = <int32_t>size
        self._table = table
        self._table_mask = <uint64_t>(table_size - 1)
        self._table_shift = 64 - bits
        # The free list: every entry past the copied ones.
        self._free = _NONE
        for old in range(<int32_t>size - 1, new - 1, -1):
            pool[old].id = 0
            pool[old].next = self._free
            self._free = old
        for old in range(new):
            table[self._probe(pool[old].id)] = old
        return 0
