"""``turbolock doctor URL``: what an operator checks before trusting a Redis with locks.

Each check says ok, note (worth knowing, not a fault) or problem; any problem makes the exit
code 1. Nothing here writes to the server except one lock of the doctor's own, taken, extended,
queried and released to prove the user may run what turbolock runs. The URL's password is
never printed.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis

from turbolock._flows.client_settings import DEFAULT_KEY_PREFIX
from turbolock.errors import LockError
from turbolock.options import options_from_url, redis_py_url

OK, NOTE, PROBLEM = "ok", "note", "problem"
DOCTOR_LOCK = "turbolock-doctor"
SAFE_POLICIES = ("noeviction",)
"""Lock keys carry a ttl, so volatile-* policies may evict them as much as allkeys-* ones."""


@dataclass(frozen=True)
class Finding:
    level: str
    check: str
    detail: str

    def line(self) -> str:
        return f"{self.level:8s} {self.check}: {self.detail}"


def _info(server: redis.Redis) -> dict[str, Any]:
    info: dict[str, Any] = server.info("server")
    if "valkey_version" in info:  # Valkey 8 says server_mode, and 7.2.4 as its redis_version
        info["redis_mode"] = info.get("server_mode", "standalone")
    info.update(server.info("replication"))
    info.update(server.info("persistence"))
    return info


def _config(server: redis.Redis, name: str) -> str | None:
    """A CONFIG GET value, or None when the user may not read it."""
    try:
        found = server.config_get(name)
    except redis.ResponseError:
        return None
    value = found.get(name)
    return None if value is None else str(value)


def _memory(server: redis.Redis) -> list[Finding]:
    policy = _config(server, "maxmemory-policy")
    limit = _config(server, "maxmemory")
    if policy is None or limit is None:
        return [Finding(NOTE, "eviction", "CONFIG GET is not allowed for this user; check maxmemory-policy "
                                          "yourself (anything but noeviction can drop lock keys)")]
    if limit == "0":
        return [Finding(OK, "eviction", f"no maxmemory limit (policy {policy} never applies)")]
    if policy in SAFE_POLICIES:
        return [Finding(OK, "eviction", f"maxmemory {limit} with {policy}: a full server refuses writes "
                                        "instead of dropping locks")]
    return [Finding(PROBLEM, "eviction", f"maxmemory {limit} with {policy}: a full server may evict lock "
                                         "keys (they carry a ttl, so volatile-* policies too) and grant a "
                                         "held lock again; use noeviction")]


def _persistence(server: redis.Redis, info: dict[str, Any]) -> Finding:
    if info.get("aof_enabled"):
        fsync = _config(server, "appendfsync") or "unknown"
        return Finding(OK, "persistence", f"appendonly yes, appendfsync {fsync}: a restart keeps the locks "
                                          "written up to the last fsync")
    save = _config(server, "save")
    detail = "RDB snapshots only" if save else "none" if save == "" else "no AOF (snapshots unknown)"
    return Finding(NOTE, "persistence", f"{detail}: a restart forgets the locks taken since the last save "
                                        "and may grant them again (see the README on restarts)")


def _mode(info: dict[str, Any]) -> list[Finding]:
    mode = str(info.get("redis_mode", "standalone"))
    role = str(info.get("role", "master"))
    product, version = (("Valkey", info["valkey_version"]) if "valkey_version" in info
                        else ("Redis", info.get("redis_version", "?")))
    what = "replica" if role == "slave" else role
    findings = [Finding(OK, "server", f"{product} {version}, {mode}, {what}")]
    if mode == "sentinel":
        findings.append(Finding(NOTE, "mode", "this is a Sentinel: give its address to SentinelLockClient, "
                                              "not to LockClient"))
    elif role == "slave":
        findings.append(Finding(PROBLEM, "mode", "this server is a replica: locks must be taken on the "
                                                 "master (writes here fail with READONLY)"))
    elif mode == "cluster":
        findings.append(Finding(NOTE, "mode", "a Redis Cluster node: use ClusterLockClient"))
    return findings


def _round_trip(server: redis.Redis) -> Finding:
    samples = []
    for _ in range(20):
        started = time.perf_counter()
        try:
            server.ping()
        except redis.exceptions.NoPermissionError:
            return Finding(NOTE, "round trip", "PING is not allowed for this user: not timed")
        samples.append((time.perf_counter() - started) * 1000.0)
    median = statistics.median(samples)
    return Finding(OK, "round trip", f"PING median {median:.2f} ms, max {max(samples):.2f} ms (20 samples)")


def _lock_cycle(url: str, cluster: bool, prefix: str) -> Finding:
    """Take, query, extend and release one lock with turbolock itself: the user's permissions
    (SET, EVALSHA and SCRIPT LOAD, PTTL) and the scripts, as a real client uses them."""
    # The URL's own timeout when it gives one (its replicas_timeout is checked against it).
    given = parse_qs(urlsplit(url).query)
    timeout = {} if "timeout" in given or "socket_timeout" in given else {"timeout": 5.0}
    if cluster:
        from turbolock.cluster import ClusterLockClient

        client: Any = ClusterLockClient.from_url(url, key_prefix=prefix, **timeout)
    else:
        from turbolock.client import LockClient

        client = LockClient.from_url(url, key_prefix=prefix, **timeout)
    try:
        lease = client.try_acquire(DOCTOR_LOCK, 10)
        if lease is None:
            return Finding(NOTE, "locks", f"{DOCTOR_LOCK!r} is held by another doctor run; try again")
        try:
            client.query(DOCTOR_LOCK)
            client.extend(lease, 10)
        finally:
            client.release(lease)
    except LockError as exc:
        return Finding(PROBLEM, "locks", f"{type(exc).__name__}: {exc} (under the key prefix {prefix!r}: "
                                         "--prefix checks the one your clients use)")
    finally:
        client.close()
    return Finding(OK, "locks", "acquire, query, extend and release work for this user (scripts loaded)")


WAKING_GRANTS = "&* +ssubscribe +sunsubscribe +spublish"
"""What an ACL user needs to be woken by releases (or the lock keys' channel pattern for ``&*``)."""


def _waking(url: str, cluster: bool, prefix: str) -> Finding:
    """Whether this user may subscribe to lock releases (``SSUBSCRIBE``) and its releases tell
    the waiters (``SPUBLISH``): without them, blocking acquires still work, polling instead of
    being woken."""
    listener = redis.Redis.from_url(redis_py_url(url), socket_timeout=5.0, socket_connect_timeout=5.0)
    subscriber = listener.pubsub()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    try:
        # A waiter subscribes to its lock's key, key prefix included: channel rights are checked on it.
        subscriber.ssubscribe(prefix + DOCTOR_LOCK)
        confirmed = subscriber.get_sharded_message(timeout=5.0)
    except redis.ResponseError as exc:
        if cluster and isinstance(exc, redis.exceptions.AskError):  # permitted (a MovedError is one too)
            return Finding(OK, "waking", "blocking acquires are woken by releases (SSUBSCRIBE allowed)")
        return Finding(NOTE, "waking", f"SSUBSCRIBE refused ({exc}): blocking acquires poll instead of being "
                                       f"woken by releases; grant {WAKING_GRANTS} to wake them")
    except (redis.ConnectionError, redis.TimeoutError):
        raise  # the server is gone, not a missing permission: diagnose reports it
    except redis.RedisError as exc:
        return Finding(NOTE, "waking", f"could not try SSUBSCRIBE: {type(exc).__name__}")
    finally:
        subscriber.close()
        listener.close()
    if not confirmed or confirmed.get("type") != "ssubscribe":
        return Finding(NOTE, "waking", "SSUBSCRIBE was not confirmed in 5 s: blocking acquires may only poll")
    return _publishing(url, prefix)


def _publishing(url: str, prefix: str) -> Finding:
    """Whether a release's script may tell the waiters (it publishes with ``SPUBLISH``, and goes
    on without a word when refused: nobody is woken)."""
    publisher = redis.Redis.from_url(redis_py_url(url), socket_timeout=5.0, socket_connect_timeout=5.0)
    try:
        publisher.execute_command("SPUBLISH", prefix + DOCTOR_LOCK, "")  # type: ignore[no-untyped-call]
    except redis.exceptions.NoPermissionError as exc:
        return Finding(NOTE, "waking", f"SPUBLISH refused ({exc}): releases tell no waiter, blocking "
                                       "acquires poll instead of being woken; grant "
                                       f"{WAKING_GRANTS} to wake them")
    except redis.ResponseError:
        pass  # a cluster's MOVED: the command is allowed; it is the slot that lives elsewhere
    finally:
        publisher.close()
    return Finding(OK, "waking", "blocking acquires are woken by releases (SSUBSCRIBE and SPUBLISH allowed)")


def diagnose(url: str, prefix: str = DEFAULT_KEY_PREFIX) -> list[Finding]:
    """Every finding about the server at ``url``, its lock checks under the key ``prefix``
    (``InvalidArgumentError`` for a bad URL)."""
    options = options_from_url(url)
    server = redis.Redis.from_url(redis_py_url(url), socket_timeout=5.0, socket_connect_timeout=5.0)
    try:
        try:
            info: dict[str, Any] | None = _info(server)
        except redis.AuthenticationError:
            return [Finding(PROBLEM, "connect", f"{options.address} refused the credentials")]
        except redis.ConnectionError as exc:
            reason = _no_secret(exc, options)
            return [Finding(PROBLEM, "connect", f"cannot reach {options.address}: {reason}")]
        except redis.exceptions.NoPermissionError:  # a user with only what its clients need
            info = None
        if info is None:
            findings = [Finding(NOTE, "server", "INFO is not allowed for this user: version, mode, role and "
                                                "persistence not checked (taken for a standalone master)")]
            info = {}
        else:
            findings = _mode(info)
            if str(info.get("redis_mode")) == "sentinel":
                return findings
        try:
            if info:
                findings.append(_persistence(server, info))
            findings.extend(_memory(server))
            findings.append(_round_trip(server))
            if str(info.get("role")) != "slave":
                cluster = str(info.get("redis_mode")) == "cluster"
                findings.append(_lock_cycle(url, cluster, prefix))
                findings.append(_waking(url, cluster, prefix))
        except (redis.ConnectionError, redis.TimeoutError) as exc:  # stopped or cut off mid-run
            reason = _no_secret(exc, options)
            findings.append(Finding(PROBLEM, "connect", f"lost {options.address} part-way: {reason}"))
        return findings
    finally:
        server.close()


def _no_secret(exc: Exception, options: Any) -> str:
    text = str(exc)
    return text.replace(options.password, "***") if options.password else text


def main(url: str, prefix: str = DEFAULT_KEY_PREFIX) -> int:
    findings = diagnose(url, prefix)
    for finding in findings:
        print(finding.line())
    problems = sum(1 for finding in findings if finding.level == PROBLEM)
    print(f"{problems} problem{'s' if problems != 1 else ''}")
    return 1 if problems else 0
