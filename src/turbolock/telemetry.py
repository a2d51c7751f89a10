"""OpenTelemetry metrics, through ``opentelemetry-api`` (``pip install 'turbolock[otel]'``).

    import turbolock.telemetry
    turbolock.telemetry.instrument()            # the global MeterProvider, or meter_provider=...

Every client in the process then reports its acquisitions, contended attempts, releases and
extends by outcome, lost locks, blocking waits, renewal lag and call durations (the README's
"Metrics" section lists the instruments and their attributes). The lock's name is an
attribute only with ``lock_name_attribute=True``; the token never is. Nothing is recorded, and
nothing is imported, until ``instrument()``; ``uninstrument()`` stops it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from turbolock import _metrics

log = logging.getLogger("turbolock.telemetry")

_BOOL = {True: "true", False: "false"}

SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                   30.0, 60.0]
"""Bucket boundaries of the duration histograms (seconds: a lock call takes a fraction of a
millisecond to a timeout), where the API takes the advice (opentelemetry-api 1.23 and later)."""

F = TypeVar("F", bound=Callable[..., None])


def _never_raises(report: F) -> F:
    """A report that fails (an SDK or exporter plug-in raising in ``add``/``record``) is dropped
    and logged once: metrics never change what a lock call does, nor leave a lock it took."""
    @functools.wraps(report)
    def guarded(self: _Instruments, *args: Any, **kwargs: Any) -> None:
        try:
            report(self, *args, **kwargs)
        except Exception:
            if not self.failed:
                self.failed = True
                log.warning("turbolock: recording a metric failed; this and later failures are dropped",
                            exc_info=True)
    return guarded  # type: ignore[return-value]


def _histogram(meter: Any, name: str, description: str) -> Any:
    try:
        return meter.create_histogram(name, unit="s", description=description,
                                      explicit_bucket_boundaries_advisory=SECONDS_BUCKETS)
    except TypeError:  # an API before 1.23: the SDK's default boundaries (or a View's)
        return meter.create_histogram(name, unit="s", description=description)


class _Instruments:
    """``_metrics.Sink`` over OpenTelemetry instruments."""

    failed = False
    """Whether a report has failed (logged once)."""

    def __init__(self, meter: Any, lock_name_attribute: bool) -> None:
        self._names = lock_name_attribute
        self._acquisitions = meter.create_counter("turbolock.lock.acquisitions", unit="{lock}",
                                                  description="Locks granted")
        self._contended = meter.create_counter("turbolock.lock.contended", unit="{attempt}",
                                               description="Acquire attempts that found the lock held")
        self._releases = meter.create_counter("turbolock.lock.releases", unit="{lock}",
                                              description="Releases, by whether the lock was still ours")
        self._extensions = meter.create_counter("turbolock.lock.extensions", unit="{lock}",
                                                description="Extends, by whether the lock was still ours")
        self._lost = meter.create_counter("turbolock.lock.lost", unit="{lock}",
                                          description="Held locks whose lost signal fired")
        self._wait = _histogram(meter, "turbolock.lock.wait", "Time blocking acquires waited")
        self._lag = _histogram(meter, "turbolock.renewal.lag",
                               "How late renewal rounds began past their due time")
        self._duration = _histogram(meter, "turbolock.call.duration",
                                    "Client calls, first byte sent to answer")

    def _named(self, attributes: dict[str, str], name: str | bytes | None) -> dict[str, str]:
        if self._names and name is not None:
            text = name if isinstance(name, str) else name.decode(errors="replace")
            attributes["turbolock.lock.name"] = text
        return attributes

    def _call(self, seconds: float | None, operation: str) -> None:
        if seconds is not None:
            self._duration.record(seconds, {"turbolock.operation": operation})

    @_never_raises
    def acquired(self, granted: int, contended: int, seconds: float | None, operation: str,
                 name: str | bytes | None = None) -> None:
        if granted:
            self._acquisitions.add(granted, self._named({}, name))
        if contended:
            self._contended.add(contended, self._named({}, name))
        self._call(seconds, operation)

    @_never_raises
    def released(self, released: int, refused: int, seconds: float | None, operation: str) -> None:
        if released:
            self._releases.add(released, {"turbolock.released": "true"})
        if refused:
            self._releases.add(refused, {"turbolock.released": "false"})
        self._call(seconds, operation)

    @_never_raises
    def extended(self, extended: int, refused: int, seconds: float | None, operation: str) -> None:
        if extended:
            self._extensions.add(extended, {"turbolock.extended": "true"})
        if refused:
            self._extensions.add(refused, {"turbolock.extended": "false"})
        self._call(seconds, operation)

    @_never_raises
    def waited(self, seconds: float, acquired: bool, name: str | bytes | None = None) -> None:
        self._wait.record(seconds, self._named({"turbolock.acquired": _BOOL[acquired]}, name))

    @_never_raises
    def lost(self, name: str | bytes | None = None) -> None:
        self._lost.add(1, self._named({}, name))

    @_never_raises
    def renewal_lag(self, seconds: float) -> None:
        self._lag.record(seconds)


def instrument(meter_provider: Any = None, *, lock_name_attribute: bool = False) -> None:
    """Start reporting to ``meter_provider`` (default: OpenTelemetry's global one).

    Raises ``ImportError`` naming the extra when ``opentelemetry-api`` is not installed.
    """
    if not isinstance(lock_name_attribute, bool):
        from turbolock.errors import InvalidArgumentTypeError

        raise InvalidArgumentTypeError("lock_name_attribute",
                                       f"must be a bool, not {type(lock_name_attribute).__name__}")
    try:
        from opentelemetry import metrics
    except ImportError:
        raise ImportError("turbolock.telemetry needs opentelemetry-api: "
                          "pip install 'turbolock[otel]'") from None
    meter = metrics.get_meter("turbolock", _version(), meter_provider=meter_provider)
    _metrics.sink = _Instruments(meter, lock_name_attribute)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("turbolock")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return ""


def uninstrument() -> None:
    """Stop reporting; calls cost what they did before ``instrument()``."""
    _metrics.sink = None


def instrumented() -> bool:
    return _metrics.sink is not None
