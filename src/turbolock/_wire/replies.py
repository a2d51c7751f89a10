"""The error a reply stands for, when it is not the answer a lock command expects."""

from __future__ import annotations

from turbolock.errors import (
    AuthenticationError,
    LockError,
    ReplyError,
    ResponseError,
    SlotMovingError,
    TimeoutError,
)


def reply_error(reply: object, name: str | bytes) -> LockError:
    """A typed error for an error reply (or a reply of a kind Redis never gives), naming the lock."""
    if type(reply) is ReplyError:
        if reply.code in ("NOAUTH", "WRONGPASS"):
            error: LockError = AuthenticationError(
                f"the server wants authentication ({reply.code}) for lock {name!r}")
        elif reply.code == "TRYAGAIN":  # a Cluster's, still so at the deadline
            error = SlotMovingError(f"lock {name!r} was not tried within the call's deadline: its slot "
                                      "kept answering TRYAGAIN (it is being moved between nodes)")
        elif reply.code == "CLUSTERDOWN":
            error = TimeoutError(f"lock {name!r} was not tried within the call's deadline: the cluster "
                                 "kept answering CLUSTERDOWN")
        else:
            error = ResponseError(f"the server answered {reply.code} for lock {name!r}: {reply}", reply.code)
    else:
        error = ResponseError(f"unexpected reply {type(reply).__name__} for lock {name!r}: the server does "
                              "not answer as Redis does")
    error.names = [name]
    return error
