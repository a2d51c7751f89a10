"""Network faults for deadline tests, all on 127.0.0.1, and a stopwatch that checks call budgets.

Three kinds of fault, each behind the same small interface (``Fault``: a ``url`` to connect to,
``inject()`` to start failing, ``heal()`` to stop):

- ``SilentServer``: a thread that accepts TCP connections and never writes a byte (it reads and
  drops what it is sent). Faulty from the start.
- ``PausedServer``: a real redis-server, SIGSTOPped by ``inject()`` and SIGCONTed by ``heal()``
  (the kernel still accepts connections for it, nobody answers them).
- ``FaultProxy``: a TCP proxy in front of a real redis-server that forwards bytes both ways
  until ``blackhole()`` (``inject()``); then it keeps every connection open, accepts new ones,
  and forwards nothing in either direction (what arrives is read and dropped). It can also drop
  one direction only, or delay bytes (the fault suite's network faults, ``tests/faults``).

Every thread here stops by itself: on ``stop()`` (the ``with`` block or the fixture's end) and,
failing that, when its ``lifetime`` runs out. Every socket is closed when it stops.
"""

from __future__ import annotations

import collections
import contextlib
import random
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Protocol, TypeVar

from turbolock.redis_server import RedisServer

T = TypeVar("T")

HOST = "127.0.0.1"
LIFETIME = 120.0
"""No fault thread outlives this many seconds, whatever happens to the test that started it."""
TICK = 0.02
"""How often the threads look at their stop flag."""


def _listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock


class _Loop:
    """A selector loop on a thread of its own, bounded in time, closing all its sockets at the end."""

    name = "netfault"

    def __init__(self, lifetime: float = LIFETIME) -> None:
        self.lifetime = lifetime
        self.listener = _listener()
        self.port: int = self.listener.getsockname()[1]
        self.host = HOST
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._selector = selectors.DefaultSelector()
        self._sockets: set[socket.socket] = set()

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> _Loop:
        self._selector.register(self.listener, selectors.EVENT_READ, self._accept)
        self._thread = threading.Thread(target=self._run, name=f"{self.name}:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
            assert not thread.is_alive(), f"{self.name} thread did not stop"

    def _run(self) -> None:
        ends = time.monotonic() + self.lifetime
        try:
            while not self._stop.is_set() and time.monotonic() < ends:
                for key, events in self._selector.select(self._timeout()):
                    callback: Callable[[socket.socket, int], None] = key.data
                    callback(key.fileobj, events)  # type: ignore[arg-type]
                self._tick()
        finally:
            for sock in list(self._sockets):
                self._close(sock)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(self.listener)
            self.listener.close()
            self._selector.close()

    def _timeout(self) -> float:
        """How long the next select may wait."""
        return TICK

    def _tick(self) -> None:
        """Work due on time rather than on a socket event (none here)."""

    def _track(self, sock: socket.socket, events: int,
               callback: Callable[[socket.socket, int], None]) -> None:
        sock.setblocking(False)
        self._sockets.add(sock)
        self._selector.register(sock, events, callback)

    def _close(self, sock: socket.socket) -> None:
        self._sockets.discard(sock)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        sock.close()

    def _accept(self, listener: socket.socket, events: int) -> None:
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        self._accepted(sock)

    def _accepted(self, sock: socket.socket) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class SilentServer(_Loop):
    """Accepts connections on 127.0.0.1 and never answers: every call made to it times out."""

    name = "silent-server"

    def start(self) -> SilentServer:
        super().start()
        return self

    def _accepted(self, sock: socket.socket) -> None:
        self._track(sock, selectors.EVENT_READ, self._drain)

    def _drain(self, sock: socket.socket, events: int) -> None:
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client hung up
            self._close(sock)

    # The Fault interface: faulty from the start.
    kind = "silent"
    warm = False

    def inject(self) -> None:
        pass

    def heal(self) -> None:
        pass


class _Pipe:
    """One proxied connection: the client's socket, the server's, what waits to go each way, and
    what is held back to go later (``(due, bytes)``, in order) while the proxy delays."""

    __slots__ = ("client", "server", "to_client", "to_server", "later_client", "later_server")

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.to_client = bytearray()
        self.to_server = bytearray()
        self.later_client: collections.deque[tuple[float, bytes]] = collections.deque()
        self.later_server: collections.deque[tuple[float, bytes]] = collections.deque()


class FaultProxy(_Loop):
    """Forwards bytes between its clients and ``target``, until told to drop them (``drop()``,
    each direction on its own; ``blackhole()`` both) or to delay them (``delay()``); ``heal()``
    forwards again. Dropping keeps every connection open and accepts new ones: what arrives in a
    dropped direction is read and thrown away, as a network that lost it would. Delayed bytes
    keep their order. With ``deliver_after_close``, bytes a client sent and then closed its
    connection still reach the server (as TCP delivers what was sent before a close), the
    server's side closing once they have; otherwise they are dropped with the connection."""

    name = "fault-proxy"
    kind = "blackhole"
    warm = True

    def __init__(self, target_host: str, target_port: int, lifetime: float = LIFETIME) -> None:
        super().__init__(lifetime)
        self.target = (target_host, target_port)
        self.drop_to_server = False
        self.drop_to_client = False
        self.delay_to_server: tuple[float, float] | None = None
        self.delay_to_client: tuple[float, float] | None = None
        self._pipes: dict[socket.socket, _Pipe] = {}
        self._lock = threading.Lock()
        self._random = random.Random()
        self.deliver_after_close = False
        self._closing: list[_Pipe] = []
        """Pipes whose client closed with bytes still to go to the server (``deliver_after_close``)."""

    def start(self) -> FaultProxy:
        super().start()
        return self

    @property
    def holed(self) -> bool:
        """Whether some direction is being dropped (a partition, for the connections' ends)."""
        return self.drop_to_server or self.drop_to_client

    def drop(self, *, to_server: bool = True, to_client: bool = True) -> None:
        with self._lock:
            self.drop_to_server = to_server
            self.drop_to_client = to_client

    def blackhole(self) -> None:
        self.drop()

    def delay(self, low: float, high: float | None = None, *, to_server: bool = True,
              to_client: bool = True) -> None:
        """Hold each chunk of bytes back ``low`` to ``high`` seconds (uniform) before sending it."""
        span = (low, low if high is None else high)
        with self._lock:
            self.delay_to_server = span if to_server else None
            self.delay_to_client = span if to_client else None

    def heal(self) -> None:
        """Forward again, at once (bytes dropped meanwhile stay dropped; delayed ones still go)."""
        with self._lock:
            self.drop_to_server = self.drop_to_client = False
            self.delay_to_server = self.delay_to_client = None

    inject = blackhole

    @property
    def connections(self) -> int:
        return len(self._pipes) // 2

    def _accepted(self, sock: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=1.0)
        except OSError:
            sock.close()
            return
        pipe = _Pipe(sock, upstream)
        self._pipes[sock] = pipe
        self._pipes[upstream] = pipe
        self._track(sock, selectors.EVENT_READ, self._ready)
        self._track(upstream, selectors.EVENT_READ, self._ready)

    def _queue(self, pipe: _Pipe, data: bytes, from_client: bool) -> None:
        if self.drop_to_server if from_client else self.drop_to_client:
            return
        span = self.delay_to_server if from_client else self.delay_to_client
        later = pipe.later_server if from_client else pipe.later_client
        out = pipe.to_server if from_client else pipe.to_client
        if span is None and not later:
            out.extend(data)
            return
        due = time.monotonic() + (self._random.uniform(*span) if span is not None else 0.0)
        later.append((max(due, later[-1][0]) if later else due, data))

    def _timeout(self) -> float:
        dues = [later[0][0] for pipe in set(self._pipes.values()) | set(self._closing)
                for later in (pipe.later_server, pipe.later_client) if later]
        return max(0.0, min(TICK, min(dues) - time.monotonic())) if dues else TICK

    def _tick(self) -> None:
        now = time.monotonic()
        for pipe in list(set(self._pipes.values()) | set(self._closing)):
            moved = False
            for later, out in ((pipe.later_server, pipe.to_server), (pipe.later_client, pipe.to_client)):
                while later and later[0][0] <= now:
                    out.extend(later.popleft()[1])
                    moved = True
            if moved:
                self._flush(pipe)
        for pipe in list(self._closing):
            if not pipe.later_server and not pipe.to_server:
                self._closing.remove(pipe)
                self._pipes.pop(pipe.server, None)
                self._close(pipe.server)

    def _ready(self, sock: socket.socket, events: int) -> None:
        pipe = self._pipes.get(sock)
        if pipe is None:
            return
        if events & selectors.EVENT_READ:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._hang_up(sock, pipe)
                return
            if data:
                self._queue(pipe, data, sock is pipe.client)
        self._flush(pipe)

    def _flush(self, pipe: _Pipe) -> None:
        if self.drop_to_server:
            pipe.to_server.clear()
        if self.drop_to_client:
            pipe.to_client.clear()
        for out, target in ((pipe.to_server, pipe.server), (pipe.to_client, pipe.client)):
            if out and target.fileno() != -1:
                try:
                    sent = target.send(out)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:
                    self._hang_up(target, pipe)
                    return
                del out[:sent]
        for side, out in ((pipe.server, pipe.to_server), (pipe.client, pipe.to_client)):
            if side.fileno() != -1:
                wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
                with contextlib.suppress(KeyError, ValueError):
                    if self._selector.get_key(side).events != wanted:
                        self._selector.modify(side, wanted, self._ready)

    def _hang_up(self, sock: socket.socket, pipe: _Pipe) -> None:
        """One side closed. Forwarding: close both, as a real network would tell the other side.
        Dropping: close only that side; the other never hears of it (a partition)."""
        sides = (sock,) if self.holed else (pipe.client, pipe.server)
        if (self.deliver_after_close and sock is pipe.client and not self.holed
                and (pipe.later_server or pipe.to_server)):
            sides = (sock,)  # the server's side closes once what the client sent has gone
            self._closing.append(pipe)
        for side in sides:
            self._pipes.pop(side, None)
            self._close(side)

    def _close(self, sock: socket.socket) -> None:
        self._pipes.pop(sock, None)
        super()._close(sock)


class PausedServer:
    """A real redis-server as a fault: ``inject()`` SIGSTOPs it, ``heal()`` SIGCONTs it."""

    kind = "paused"
    warm = True

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.url = server.url
        self.host = server.host
        self.port = server.port

    def inject(self) -> None:
        self.server.pause()

    def heal(self) -> None:
        self.server.resume()


class Fault(Protocol):
    kind: str
    warm: bool
    """Whether the endpoint works before ``inject()`` (so a client can make a call first)."""
    url: str
    host: str
    port: int

    def inject(self) -> None: ...

    def heal(self) -> None: ...


@contextlib.contextmanager
def paused(server: RedisServer) -> Iterator[RedisServer]:
    """SIGSTOP ``server`` for the block; it is always resumed."""
    server.pause()
    try:
        yield server
    finally:
        server.resume()


@contextlib.contextmanager
def open_fault(kind: str, make_server: Callable[[], RedisServer],
               proxied: Callable[[], RedisServer]) -> Iterator[Fault]:
    """A fault of ``kind`` ("silent", "paused" or "blackhole"), healed and stopped at the end.

    ``make_server()`` gives the redis-server to pause; ``proxied()`` the one to put the proxy in
    front of (neither is called unless needed).
    """
    if kind == "silent":
        with SilentServer() as silent:
            yield silent
    elif kind == "paused":
        fault = PausedServer(make_server())
        try:
            yield fault
        finally:
            fault.heal()
    elif kind == "blackhole":
        target = proxied()
        with FaultProxy(target.host, target.port) as proxy:
            yield proxy
    else:
        raise ValueError(f"unknown fault {kind!r}")


# -- measuring calls against their budget -----------------------------------------------------------

SLACK = 0.15
"""What a call may take beyond its own budget (scheduling on a shared 2-core machine)."""


class Outcome:
    __slots__ = ("label", "elapsed", "budget", "result", "error")

    def __init__(self, label: str, elapsed: float, budget: float, result: object,
                 error: BaseException | None) -> None:
        self.label = label
        self.elapsed = elapsed
        self.budget = budget
        self.result = result
        self.error = error

    @property
    def over(self) -> bool:
        return self.elapsed > self.budget + SLACK

    def describe(self) -> str:
        got = f"raised {type(self.error).__name__}" if self.error is not None else f"returned {self.result!r}"
        return (f"{self.label}: {self.elapsed:.3f}s (budget {self.budget:.3f}s + slack {SLACK:.2f}s), "
                f"{got}")


class Stopwatch:
    """Times calls with ``time.monotonic`` and keeps every outcome, so one test reports every call
    that broke its budget (or did not fail the way it should) at once, with the elapsed times."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.problems: list[str] = []

    def run(self, label: str, budget: float, call: Callable[[], Any]) -> Outcome:
        started = time.monotonic()
        result: object = None
        error: BaseException | None = None
        try:
            result = call()
        except Exception as exc:
            error = exc
        outcome = Outcome(label, time.monotonic() - started, budget, result, error)
        return self._record(outcome)

    async def arun(self, label: str, budget: float, call: Callable[[], Any]) -> Outcome:
        started = time.monotonic()
        result: object = None
        error: BaseException | None = None
        try:
            result = await call()
        except Exception as exc:
            error = exc
        outcome = Outcome(label, time.monotonic() - started, budget, result, error)
        return self._record(outcome)

    def _record(self, outcome: Outcome) -> Outcome:
        self.outcomes.append(outcome)
        if outcome.over:
            self.problems.append(f"over budget: {outcome.describe()}")
        return outcome

    def expect(self, outcome: Outcome, ok: bool, what: str) -> None:
        """Record a problem unless ``ok``: ``what`` says what the call should have done."""
        if not ok:
            self.problems.append(f"{outcome.label} should have {what}: {outcome.describe()}")

    def expect_raises(self, outcome: Outcome, *types: type[BaseException]) -> None:
        names = " or ".join(t.__name__ for t in types)
        self.expect(outcome, isinstance(outcome.error, types), f"raised {names}")

    def check(self) -> None:
        """Fail with every problem found and the whole timeline, elapsed times and budgets."""
        if self.problems:
            timeline = "\n  ".join(outcome.describe() for outcome in self.outcomes)
            raise AssertionError(f"{len(self.problems)} problem(s):\n- " + "\n- ".join(self.problems)
                                 + f"\ncalls, in order:\n  {timeline}")


def served_after_failures(call: Callable[[], T], timeout: float, limit: float = 30.0) -> tuple[int, T]:
    """Call ``call`` until it stops raising ``turbolock.ConnectionError`` (a failover under way),
    asserting that every failing call returned within twice its ``timeout`` (plus slack); the
    number of failures and the first answer."""
    from turbolock import ConnectionError as LockConnectionError

    failures = 0
    started = time.monotonic()
    while True:
        assert time.monotonic() - started < limit, "the client never reached the promoted replica"
        call_started = time.monotonic()
        try:
            return failures, call()
        except LockConnectionError:
            failures += 1
            elapsed = time.monotonic() - call_started
            assert elapsed < timeout * 2 + 0.3, f"a call took {elapsed:.2f}s with a {timeout}s timeout"
            time.sleep(0.1)
