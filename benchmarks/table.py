"""The comparison as a plain-text table: one block per section, one line per ratio."""

from __future__ import annotations

from .report import RatioResult, RowResult, SectionResult

_HEADER = ("contender", "median", "spread (min-max)", "ratio", "vs", "target", "met?")
_WIDTHS = (36, 9, 17, 6, 34, 7, 4)


def _line(cells: tuple[str, ...]) -> str:
    left, *rest = cells
    parts = [left.ljust(_WIDTHS[0])]
    for cell, width, text_column in zip(rest, _WIDTHS[1:], (False, False, False, True, False, False),
                                        strict=True):
        parts.append(cell.ljust(width) if text_column else cell.rjust(width))
    return "  ".join(parts).rstrip()


def _met(ratio: RatioResult) -> str:
    if ratio.target is None:
        return ""
    return {True: "yes", False: "NO", None: "n/a"}[ratio.met]


def _ratio_cells(ratio: RatioResult) -> tuple[str, str, str, str]:
    value = f"{ratio.ratio.median:.2f}x" if ratio.ratio else "n/a"
    target = f">={ratio.target:g}x" if ratio.target is not None else ""
    return value, ratio.baseline, target, _met(ratio)


def _row_lines(row: RowResult, number_format: str) -> list[str]:
    if row.summary is None:
        median, spread = "n/a", ""
    else:
        s = row.summary
        median = number_format.format(s.median)
        spread = f"{number_format.format(s.low)}-{number_format.format(s.high)}"
    first: tuple[str, str, str, str] = _ratio_cells(row.ratios[0]) if row.ratios else ("", row.note, "", "")
    lines = [_line(("  " + row.contender, median, spread, *first))]
    for ratio in row.ratios[1:]:
        lines.append(_line(("", "", "", *_ratio_cells(ratio))))
    if row.ratios and row.note:
        lines.append(_line(("", "", "", "", row.note, "", "")))
    return lines


def render(results: list[SectionResult]) -> str:
    out = [_line(_HEADER), "-" * (sum(_WIDTHS) + 2 * (len(_WIDTHS) - 1))]
    for result in results:
        section = result.section
        out.append(f"{section.title} [{section.unit}]")
        for row in result.rows:
            out.extend(_row_lines(row, section.number_format))
        out.append("")
    return "\n".join(out).rstrip() + "\n"
