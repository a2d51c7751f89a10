"""Each fault's expectation, asserted on its outcome and recorded in the summary table.

Where the library promises safety every kind of violation must be absent. Where it does not
(a restart that forgets the locks, a holder paused after its last check), the kinds that fault
causes must be found (the negative control: it proves the checker sees them) and every other
kind must still be absent: calls keep their deadlines and losses are signalled whatever fails.
"""

from __future__ import annotations

from ._checker import KINDS
from ._run import Outcome
from ._summary import ROWS, Row


def _record(outcome: Outcome, expected: str, problems: list[str]) -> None:
    found = outcome.findings.describe()
    if outcome.refused:
        found += f" ({outcome.refused} stale writes refused)"
    if outcome.starved:
        calls = "call" if outcome.starved == 1 else "calls"
        found += f" ({outcome.starved} {calls} late by their wait for a CPU only)"
    ROWS.append(Row(outcome.fault, outcome.topology, outcome.cores, outcome.sections, found, expected,
                    "FAIL" if problems else "pass"))
    began, ended = outcome.window
    assert not problems, (f"{outcome.fault} on {outcome.topology}: " + "; ".join(problems)
                          + f"\n(the fault's window: {began:.3f} to {ended:.3f}; seed {outcome.seed})\n"
                          + outcome.findings.details())


def _enough(outcome: Outcome, least: int) -> list[str]:
    if outcome.sections < least:
        return [f"only {outcome.sections} critical sections ran (at least {least} expected)"]
    if not any(section.renewed for section in outcome.history.sections):
        return ["no renewed section ran: the renewal and loss-signal checks saw nothing"]
    return []


def expect_safe(outcome: Outcome, *, least: int = 10, refused: bool = False) -> None:
    """No violation of any kind; ``refused``: a fenced resource must have refused stale writes
    (proof the pauses let successors in)."""
    problems = [f"{kind}: {outcome.findings.count(kind)}" for kind in KINDS if outcome.findings.count(kind)]
    problems += _enough(outcome, least)
    if refused and not outcome.refused:
        problems.append("the fenced resource refused nothing: no stale write was ever attempted")
    _record(outcome, "none" + (", stale writes refused" if refused else ""), problems)


def expect_detected(outcome: Outcome, kinds: tuple[str, ...], *, least: int = 10) -> None:
    """The negative control: each of ``kinds`` found at least once, every other kind absent."""
    problems = [f"{kind} not detected" for kind in kinds if not outcome.findings.count(kind)]
    problems += [f"{kind}: {outcome.findings.count(kind)}" for kind in KINDS
                 if kind not in kinds and outcome.findings.count(kind)]
    problems += _enough(outcome, least)
    _record(outcome, " + ".join(kinds) + " (negative control)", problems)
