"""The compiled core's list helpers kept a list's item pointer or size (or a column's) across a
point where Python code can run (an old item's __del__, a user sequence's __iter__, a collection
set off by an allocation), then read or wrote past the list with bounds checks off: SIGSEGV
where the pure core gives a result or a typed error (found in review; the library itself passes
fresh lists, so a hardening). Each case runs in a child process, so a crash cannot take pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_CASES = {
    # ext/encode.pyx append_evalsha_multikey: name_items/room taken before tokens' PySequence_Fast,
    # which runs Tokens.__iter__ and grows (reallocates) names.
    "append_evalsha_multikey": """
        names = [b"a"]
        class Tokens:
            def __len__(self): return 1
            def __iter__(self):
                names.extend([b"k" * 65536] * 64)
                return iter([b"t"])
        buf = core.CommandBuffer(b"")
        try:
            buf.append_evalsha_multikey(b"sha", names, Tokens(), 1000)
            print("ok", buf.take())
        except Exception as exc:
            print(type(exc).__name__)
    """,
    # ext/leases.pyx LeaseMaker.make: out[start + i] = lease drops the old item, whose __del__
    # empties the column; column[first + i] is then read past its end (boundscheck off).
    "LeaseMaker.make": """
        class L:
            __slots__ = ("a", "b")
            def __init__(self, a, b): self.a, self.b = a, b
        col = [object() for _ in range(1000)]
        class Evil:
            def __del__(self): col.clear()
        out = [Evil()] + [None] * 999
        try:
            core.LeaseMaker(L, ("a", "b"), ()).make(out, 0, (col,), 0, 1000, (1,))
            print("ok", len(out))
        except Exception as exc:
            print(type(exc).__name__)
    """,
    # ext/shares.pyx put_items: Py_DECREF(old) runs Evil.__del__, which empties target; later
    # iterations PyList_SET_ITEM into the freed item array.
    "put_items": """
        class Evil:
            def __del__(self): target.clear()
        target = [Evil()] + list(range(99999))
        try:
            core.put_items(target, list(range(100000)), [0] * 100000)
            print("ok", len(target))
        except Exception as exc:
            print(type(exc).__name__)
    """,
}


def _run(core: str, body: str) -> subprocess.CompletedProcess[str]:
    head = ("from turbolock import _core_c as c\nfrom turbolock._wire import core_py as p\n"
            f"core = {'c' if core == 'c' else 'p'}\n")
    return subprocess.run([sys.executable, "-c", head + textwrap.dedent(body)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(_CASES))
def test_list_changed_mid_call_is_no_crash_and_matches_the_pure_core(case: str) -> None:
    py = _run("py", _CASES[case])
    assert py.returncode == 0, py.stderr
    c = _run("c", _CASES[case])
    assert c.returncode == 0, (f"compiled core died with {c.returncode} (pure core printed "
                               f"{py.stdout.strip()!r})")
    assert c.stdout == py.stdout
