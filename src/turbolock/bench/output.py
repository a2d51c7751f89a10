"""``turbolock bench``'s results for people: a text table, and a plot when matplotlib is installed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .run import MetricResult

PLOT_SUFFIXES = (".png", ".svg")


def table(results: Sequence[MetricResult]) -> str:
    width = max((len(row.contender) for result in results for row in result.rows), default=10) + 2
    lines = [f"{'contender':<{width}}{'median':>12}{'spread (min-max)':>24}{'turbolock is':>15}"]
    for result in results:
        lines.append("")
        lines.append(f"{result.metric.title} [{result.metric.unit}]")
        for row in result.rows:
            s = row.summary
            median = f"{s.median:,.0f}" if s else "n/a"
            spread = f"{s.low:,.0f}-{s.high:,.0f}" if s else ""
            ratio = f"{row.versus_turbolock.median:.2f}x" if row.versus_turbolock else ""
            lines.append(f"  {row.contender:<{width - 2}}{median:>12}{spread:>24}{ratio:>15}")
    return "\n".join(lines) + "\n"


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed, or the file's type is not one it is asked to draw."""


def check_plot_target(path: str) -> None:
    """Fails before anything is measured: a missing matplotlib or a wrong suffix."""
    if Path(path).suffix.lower() not in PLOT_SUFFIXES:
        raise PlotUnavailable(f"--plot: {path!r} must end in .png or .svg")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'turbolock[cli]'") from None


def plot(results: Sequence[MetricResult], path: str, subtitle: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import StrMethodFormatter

    height = 1.0 + 0.55 * sum(len(r.rows) + 1 for r in results)
    figure, axes = plt.subplots(len(results), 1, figsize=(11, height),
                                squeeze=False, gridspec_kw={"height_ratios": [len(r.rows) for r in results]})
    for ax, result in zip(axes[:, 0], results, strict=True):
        rows = [row for row in result.rows if row.summary]
        labels = [row.contender for row in rows]
        medians = [row.summary.median for row in rows if row.summary]
        below = [row.summary.median - row.summary.low for row in rows if row.summary]
        above = [row.summary.high - row.summary.median for row in rows if row.summary]
        colours = ["#c0392b" if i == 0 else "#7f8c8d" for i in range(len(rows))]
        ax.barh(range(len(rows)), medians, height=0.6, xerr=[below, above], color=colours, capsize=3)
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{result.metric.title} [{result.metric.unit}]", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=8)
    figure.suptitle(f"turbolock bench: medians, bars from min to max. {subtitle}", fontsize=9)
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    figure.savefig(path)
    plt.close(figure)
