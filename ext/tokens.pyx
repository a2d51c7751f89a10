# Random lock tokens straight from the OS CSPRNG, one read per batch. Included by _core_c.pyx.

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.exc cimport PyErr_SetFromErrno

cdef extern from *:
    """
    #include <errno.h>
    #include <fcntl.h>
    #include <unistd.h>
    #if defined(__linux__) && defined(__has_include)
    #  if __has_include(<sys/random.h>)
    #    include <sys/random.h>
    #    define TURBOLOCK_HAVE_GETRANDOM 1
    #  endif
    #endif

    /* Fills buf from the OS CSPRNG as os.urandom does: 0, or -1 with errno set. */
    static int turbolock_urandom(char *buf, size_t size)
    {
        ssize_t got;
        int fd, saved;
    #ifdef TURBOLOCK_HAVE_GETRANDOM
        while (size > 0) {
            got = getrandom(buf, size, 0);
            if (got < 0) {
                if (errno == EINTR)
                    continue;
                /* Like CPython: ENOSYS before Linux 3.17, EPERM under some seccomp filters. */
                if (errno == ENOSYS || errno == EPERM)
                    break;
                return -1;
            }
            buf += got;
            size -= (size_t)got;
        }
        if (size == 0)
            return 0;
    #endif
        fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        while (size > 0) {
            got = read(fd, buf, size);
            if (got <= 0) {
                if (got < 0 && errno == EINTR)
                    continue;
                saved = got < 0 ? errno : EIO;
                close(fd);
                errno = saved;
                return -1;
            }
            buf += got;
            size -= (size_t)got;
        }
        close(fd);
        return 0;
    }
    """
    int _urandom "turbolock_urandom"(char* buf, size_t size) nogil

cdef enum:
    # 16 bytes (128 bits) keeps tokens unguessable and collision-free across clients.
    _MIN_TOKEN_SIZE = 16
    _MAX_TOKEN_SIZE = 1024


cdef Py_ssize_t _check_token_size(size) except -1:
    if type(size) is not int or not _MIN_TOKEN_SIZE <= size <= _MAX_TOKEN_SIZE:
        raise ValueError(
            f"token_size must be an int from {_MIN_TOKEN_SIZE} to {_MAX_TOKEN_SIZE}, not {size!r}")
    return size


cdef list _random_tokens(Py_ssize_t count, Py_ssize_t size):
    """``count`` tokens of ``size`` random bytes each, from one read of the CSPRNG."""
    cdef bytes block = PyBytes_FromStringAndSize(NULL, count * size)
    cdef char* data = _bytes_data(<PyObject*>block)
    # The GIL stays held, as os.urandom holds it: the read is short (about 50 µs for 1000
    # tokens here), and giving the GIL up could cost a contended re-acquire of up to 5 ms.
    if _urandom(data, count * size) < 0:
        PyErr_SetFromErrno(OSError)
    return [(data + i * size)[:size] for i in range(count)]
