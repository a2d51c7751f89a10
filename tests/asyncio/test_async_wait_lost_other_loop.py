"""``wait_lost`` from a loop while the client's own loop still runs in another thread is refused
(README: "used from a loop while another thread's loop still runs it, it raises
LockUsageError"). It parked a future of the calling loop among the renewer's waiters, which the
renewer's loop then resolved from its own thread (asyncio futures are not thread-safe: the
waiting loop was never woken, and the wait ran to its timeout although the lock was lost;
found in review)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any

import redis
from async_helpers import NewClient, new_loop, run_in_new_loop

from turbolock import LockUsageError


def test_wait_lost_from_a_loop_of_another_thread_is_refused(loop_name: str, raw: redis.Redis,
                                                            new_client: NewClient) -> None:
    client = new_client()
    other = new_loop(loop_name)
    thread = threading.Thread(target=other.run_forever, name="client-loop", daemon=True)
    thread.start()

    def in_other_loop(body: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(body, other).result(10)

    timer = threading.Timer(0.3, lambda: raw.delete(client.key_prefix + b"renewed"))
    try:
        lease = in_other_loop(client.try_acquire("renewed", 1, auto_renew=True))
        assert lease is not None

        async def here() -> tuple[bool | None, float, BaseException | None]:
            started = time.monotonic()
            timer.start()  # the key is deleted 0.3 s from now: the renewer finds the lock lost
            try:
                lost = await client.wait_lost(lease, timeout=5)
            except LockUsageError as exc:
                return None, time.monotonic() - started, exc
            return lost, time.monotonic() - started, None

        lost, elapsed, refused = run_in_new_loop(loop_name, here)
        assert refused is not None, (
            f"wait_lost from another thread's loop was not refused: it returned {lost} after {elapsed:.2f}s "
            f"of its 5 s timeout (lease.is_lost={lease.is_lost}: lost at about 0.3-1 s, never woken)")
    finally:
        timer.cancel()
        if timer.is_alive():
            timer.join()
        try:
            in_other_loop(client.close())
        finally:
            other.call_soon_threadsafe(other.stop)
            thread.join(10)
            other.close()
