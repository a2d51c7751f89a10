"""What the compiled core is compared with the pure one (its oracle) on, written once for the
differential tests (``tests/core``) and the fuzzer (``scripts/fuzz_core.py``, which runs against a
copy of this package and so cannot import from the tests). Nothing in the client uses it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import ModuleType

from turbolock.errors import ProtocolError


def parser_trace(core: ModuleType, stream: bytes, cuts: Sequence[int], limits: Sequence[int],
                 piece: Callable[[bytes], object] | None = None) -> list[object]:
    """Feed ``stream`` to a new parser of ``core`` in pieces cut at ``cuts`` (each as
    ``piece(data)`` where given), reading after each with the next of ``limits`` (in turn), then
    all that is left: what each step gave back and how much stayed buffered, and last, where the
    parser refused the stream, ``(ProtocolError, message, buffered)``."""
    parser = core.RespParser()
    trace: list[object] = []
    bounds = [0, *sorted(cuts), len(stream)]
    try:
        for i, (start, stop) in enumerate(itertools.pairwise(bounds)):
            data = stream[start:stop]
            parser.feed(data if piece is None else piece(data))
            trace.append((parser.get_replies(limits[i % len(limits)]), parser.buffered()))
        trace.append((parser.get_replies(), parser.buffered()))
    except ProtocolError as exc:
        trace.append((ProtocolError, str(exc), parser.buffered()))
    return trace


def append_outcome(buffer: object, method: str, args: tuple[object, ...]) -> tuple[object, object]:
    """What ``buffer.<method>(*args)`` (a ``CommandBuffer``'s append) did: ``("ok", what it
    returned)``, or the type and message of the ``TypeError`` or ``ValueError`` it raised
    (``UnicodeEncodeError`` and ``OverflowError`` included)."""
    try:
        return "ok", getattr(buffer, method)(*args)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
