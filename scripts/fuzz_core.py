"""The atheris target for scripts/fuzz: the compiled core's RESP parser and encoder against the pure
core as the oracle. Any difference in replies, bytes or errors raises, and atheris keeps the input.

Run it through scripts/fuzz, which builds the compiled core with coverage instrumentation for it;
``python scripts/fuzz_core.py FILE`` replays one input.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["turbolock"]):
    from turbolock._wire import core_py

import turbolock._core_c as core_c

# The harness, shared with tests/core; imported after the block, so not instrumented.
from turbolock._wire.core_compare import append_outcome, parser_trace


class Bytes(bytes):
    pass


_SPECIAL_TTLS = [0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64,
                 True, 2.5, "5", None]
_ODD_VALUES: list[object] = ["text", "\ud800", 7, -(2**70), None, True, 1.5, bytearray(b"ba"), Bytes(b"sub")]


def _differ(what: str, compiled: object, pure: object) -> None:
    raise AssertionError(f"the cores differ on {what}:\n  compiled: {compiled!r:.600}\n  pure: {pure!r:.600}")


def _blob(fdp: atheris.FuzzedDataProvider) -> bytes:
    if fdp.ConsumeIntInRange(0, 40) == 0:
        # Large, cheaply: a short pattern repeated past the encoder's 4 KiB or 1 MiB thresholds.
        size = fdp.PickValueInList([4095, 4096, 5000, 70000, (1 << 20) + 1])
        pattern = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 4)) or b"x"
        return (pattern * size)[:size]
    return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 24))


def _value(fdp: atheris.FuzzedDataProvider) -> object:
    if fdp.ConsumeIntInRange(0, 7):
        return _blob(fdp)
    return fdp.PickValueInList(_ODD_VALUES)


def _ttl(fdp: atheris.FuzzedDataProvider) -> object:
    if fdp.ConsumeBool():
        return fdp.ConsumeIntInRange(1, 30 * 24 * 3600 * 1000)
    if fdp.ConsumeBool():
        return fdp.ConsumeInt(10)
    return fdp.PickValueInList(_SPECIAL_TTLS)


def _values(fdp: atheris.FuzzedDataProvider) -> list[object]:
    return [_value(fdp) for _ in range(fdp.ConsumeIntInRange(0, 6))]


def _append(fdp: atheris.FuzzedDataProvider) -> tuple[str, tuple[object, ...]]:
    method = fdp.PickValueInList([
        "append_command", "append_set_nx_px", "append_set_nx_px_many", "append_evalsha",
        "append_evalsha_many", "append_evalsha_multikey", "append_pttl", "append_pttl_many",
    ])
    if method == "append_command":
        args: list[object] = [fdp.ConsumeUnicode(8) if fdp.ConsumeBool() else _value(fdp)
                              for _ in range(fdp.ConsumeIntInRange(0, 5))]
        return method, (args,)
    if method == "append_pttl":
        return method, (_value(fdp),)
    if method == "append_pttl_many":
        return method, (_values(fdp),)
    if method == "append_set_nx_px":
        return method, (_value(fdp), _value(fdp), _ttl(fdp))
    if method == "append_set_nx_px_many":
        return method, (_values(fdp), _values(fdp), _ttl(fdp))
    sha = _value(fdp)
    ttl = None if fdp.ConsumeBool() else _ttl(fdp)
    if method == "append_evalsha":
        return method, (sha, _value(fdp), _value(fdp), ttl)
    return method, (sha, _values(fdp), _values(fdp), ttl)


def _apply(buffer: object, method: str, args: tuple[object, ...]) -> tuple[object, ...]:
    return (*append_outcome(buffer, method, args), buffer.pending, len(buffer))  # type: ignore[attr-defined]


def fuzz_encoder(fdp: atheris.FuzzedDataProvider) -> None:
    prefix = _blob(fdp) if fdp.ConsumeIntInRange(0, 9) else Bytes(b"p:")
    c_buffer, py_buffer = core_c.CommandBuffer(prefix), core_py.CommandBuffer(prefix)
    for _ in range(fdp.ConsumeIntInRange(1, 6)):
        method, args = _append(fdp)
        c_outcome = _apply(c_buffer, method, args)
        py_outcome = _apply(py_buffer, method, args)
        if c_outcome != py_outcome:
            _differ(f"{method}{args!r:.300}", c_outcome, py_outcome)
        if fdp.ConsumeBool():
            c_wire, py_wire = c_buffer.take(), py_buffer.take()
            if c_wire != py_wire:
                _differ("the bytes taken", c_wire, py_wire)


def fuzz_parser(data: bytes) -> None:
    """One header byte (pieces, read limits, repetition), then the stream itself, as it comes."""
    header, stream = (data[0], data[1:]) if data else (0, b"")
    limits = [[-1], [1], [0, 2], [3, -1]][(header >> 3) & 3]
    stream *= [1, 1, 1, 1, 1, 2, 100, 2000][header >> 5]  # past the compiled core's 16 KiB hand-over
    cuts = [(i * 7919 + len(stream) // (i + 2)) % (len(stream) + 1) for i in range(header & 7)]
    c_trace = parser_trace(core_c, stream, cuts, limits)
    py_trace = parser_trace(core_py, stream, cuts, limits)
    if c_trace != py_trace:
        _differ(f"the replies to {stream!r:.300}", c_trace, py_trace)


def fuzz_key_slots(fdp: atheris.FuzzedDataProvider) -> None:
    prefix = _value(fdp)
    keys = _values(fdp)
    outcomes = []
    for core in (core_c, core_py):
        try:
            outcomes.append(core.key_slots(prefix, keys))
        except TypeError:
            outcomes.append(TypeError)
    if outcomes[0] != outcomes[1]:
        _differ(f"key_slots{(prefix, keys)!r:.300}", outcomes[0], outcomes[1])


def test_one_input(data: bytes) -> None:
    """The first byte picks the target: the parser mostly, the encoder, key_slots."""
    if not data:
        return
    target, rest = data[0] % 10, data[1:]
    if target < 6:
        fuzz_parser(rest)
    elif target < 9:
        fuzz_encoder(atheris.FuzzedDataProvider(rest))
    else:
        fuzz_key_slots(atheris.FuzzedDataProvider(rest))


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
