# The RESP2 reply reader of hiredis, declared only as far as hiredis 0.14 and 1.x agree: it
# compiles against both, but only 0.14.1 (Debian's, and the copy release wheels bundle from
# vendor/hiredis) passes the core tests; 1.x words its errors differently (vendor/hiredis/README.md).
# pkg-config puts the hiredis include directory itself on the path (in 0.14 and 1.x alike),
# so the header is "hiredis.h", not "hiredis/hiredis.h".

cdef extern from *:
    """
    #include "hiredis.h"
    /* hiredis 1.x widened createArray's count from int to size_t. */
    #if HIREDIS_MAJOR >= 1
    typedef size_t tl_array_len;
    #else
    typedef int tl_array_len;
    #endif

    /* hiredis 1.x also parses RESP3; with no createDouble/createBool it would hand back
       dummy pointers as replies, so a RESP2 reader routes both to its refusal callback. */
    typedef void *(*tl_refuse_fn)(const redisReadTask *);
    #if HIREDIS_MAJOR >= 1
    static tl_refuse_fn tl_refuse;
    static void *tl_refuse_double(const redisReadTask *t, double d, char *s, size_t n) {
        (void)d; (void)s; (void)n; return tl_refuse(t);
    }
    static void *tl_refuse_bool(const redisReadTask *t, int b) { (void)b; return tl_refuse(t); }
    static void tl_refuse_resp3(redisReplyObjectFunctions *fn, tl_refuse_fn refuse) {
        tl_refuse = refuse;
        fn->createDouble = tl_refuse_double;
        fn->createBool = tl_refuse_bool;
    }
    #else
    static void tl_refuse_resp3(redisReplyObjectFunctions *fn, tl_refuse_fn refuse) {
        (void)fn; (void)refuse;
    }
    #endif
    """
    ctypedef int tl_array_len


cdef extern from "hiredis.h" nogil:
    enum:
        REDIS_OK
        REDIS_ERR
        REDIS_REPLY_STRING
        REDIS_REPLY_ARRAY
        REDIS_REPLY_INTEGER
        REDIS_REPLY_NIL
        REDIS_REPLY_STATUS
        REDIS_REPLY_ERROR

    ctypedef struct redisReadTask:
        int type
        int idx
        void* obj
        redisReadTask* parent
        void* privdata

    ctypedef struct redisReplyObjectFunctions:
        void* (*createString)(const redisReadTask*, char*, size_t) noexcept
        void* (*createArray)(const redisReadTask*, tl_array_len) noexcept
        void* (*createInteger)(const redisReadTask*, long long) noexcept
        void* (*createNil)(const redisReadTask*) noexcept
        void (*freeObject)(void*) noexcept

    ctypedef struct redisReader:
        int err
        char errstr[128]
        char* buf
        size_t pos
        size_t len
        size_t maxbuf
        void* privdata

    redisReader* redisReaderCreate()
    redisReader* redisReaderCreateWithFunctions(redisReplyObjectFunctions* fn)
    void redisReaderFree(redisReader* r)
    int redisReaderFeed(redisReader* r, const char* buf, size_t len)
    int redisReaderGetReply(redisReader* r, void** reply)


cdef extern from *:
    void tl_refuse_resp3(redisReplyObjectFunctions* fn, void* (*refuse)(const redisReadTask*) noexcept)
