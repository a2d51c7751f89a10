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


def describe_names(names: list[str | bytes]) -> str:
    if len(names) == 1:
        return f"lock {names[0]!r}"
    shown = ", ".join(repr(n) for n in names[:5])
    return f"{len(names)} locks ({shown}{', ...' if len(names) > 5 else ''})"


def reply_error(reply: object, name: str | bytes, call: list[str | bytes] | None = None) -> LockError:
    """A typed error for an error reply (or a reply of a kind Redis never gives), naming the lock;
    with ``call`` (the locks of one multi-key script call the server refused whole: it cannot
    say which key it refused), naming every one of them."""
    names = [name] if call is None or len(call) < 2 else call
    subject = describe_names(names) if len(names) == 1 else f"one call over {describe_names(names)}"
    if type(reply) is ReplyError:
        if reply.code in ("NOAUTH", "WRONGPASS"):
            error: LockError = AuthenticationError(
                f"the server wants authentication ({reply.code}) for {subject}")
        elif reply.code == "TRYAGAIN":  # a Cluster's, still so at the deadline
            error = SlotMovingError(f"{subject} was not tried within the call's deadline: its slot "
                                    "kept answering TRYAGAIN (it is being moved between nodes)")
        elif reply.code == "CLUSTERDOWN":
            error = TimeoutError(f"{subject} was not tried within the call's deadline: the cluster "
                                 "kept answering CLUSTERDOWN")
        else:
            error = ResponseError(f"the server answered {reply.code} for {subject}: {reply}", reply.code)
    else:
        error = ResponseError(f"unexpected reply {type(reply).__name__} for {subject}: the server does "
                              "not answer as Redis does")
    error.names = names
    return error


NOT_RUN = frozenset(("NOPERM", "NOAUTH", "WRONGPASS", "READONLY", "LOADING", "BUSY", "MASTERDOWN",
                     "NOREPLICAS", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "CROSSSLOT"))
"""Error codes a script call is refused with before it runs (an ACL check of its keys, a
replica, a server loading or busy, a Cluster's routing): none of its locks was touched. Any
other error may end a script half-way."""
