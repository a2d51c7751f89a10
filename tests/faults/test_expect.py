"""The expectations' own floor: a run with too few sections, or with no renewed section at all
(whose renewal and loss-signal checks would have passed on nothing), fails however clean its
findings; the same run with one renewed section passes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._checker import check
from ._expect import expect_safe
from ._history import History
from ._run import Outcome
from ._summary import ROWS
from .test_checker import section


@pytest.fixture(autouse=True)
def _kept_out_of_the_summary() -> Iterator[None]:
    """These made-up runs are not the suite's: their rows leave the summary table."""
    kept = len(ROWS)
    yield
    del ROWS[kept:]


def _outcome(renewed: bool) -> Outcome:
    sections = [section(w, read_end=float(w), write_start=float(w) + 0.01, renewed=renewed and w == 0,
                        value_read=w) for w in range(10)]
    history = History([], sections, [], {"a": 10}, [])
    return Outcome("none", "single", history, check(history), ["c"], ["threads"], (0.0, 1.0), 1)


def test_a_run_without_a_renewed_section_fails() -> None:
    with pytest.raises(AssertionError, match="no renewed section ran"):
        expect_safe(_outcome(renewed=False))


def test_the_same_run_with_one_renewed_section_passes() -> None:
    expect_safe(_outcome(renewed=True))
