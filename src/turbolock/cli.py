"""The ``turbolock`` command: ``turbolock demo`` runs the flash-sale demo, ``turbolock doctor URL``
checks a server before it is trusted with locks, ``turbolock locks list|inspect|release`` shows
and frees the locks on one, ``turbolock bench`` measures turbolock against redis-py."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, NoReturn

_URL_WITH_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*(?:@|password=)[^\s'\"]*")


class _Parser(argparse.ArgumentParser):
    """argparse quotes a value it refuses ("invalid choice: '...'", "unrecognized arguments:
    ..."): a URL given in the wrong place is never quoted with its credentials. Each argument
    holding some is taken out whole (a password may hold a quote or a space, where a pattern
    for URLs in the message would stop); the pattern catches what is left."""

    secret_arguments: list[str] = []  # the run's, shared by every subparser

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: Any = None) -> tuple[Any, list[str]]:
        given = sys.argv[1:] if args is None else list(args)
        # Added to, not replaced: a subparser sees only the arguments after its command's name.
        secrets = {arg for arg in given if "://" in arg and ("@" in arg or "password=" in arg)}
        _Parser.secret_arguments = sorted(secrets.union(_Parser.secret_arguments), key=len, reverse=True)
        return super().parse_known_args(given, namespace)

    def error(self, message: str) -> NoReturn:
        for argument in _Parser.secret_arguments:  # as quoted by %r (quotes escaped), then as given
            message = message.replace(repr(argument), "<a URL with credentials>")
            message = message.replace(argument, "<a URL with credentials>")
        super().error(_URL_WITH_CREDENTIALS.sub("<a URL with credentials>", message))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return min(value, sys.maxsize)  # more than could ever be listed or started


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="turbolock", description="Fast distributed locks on Redis.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="flash sale: worker processes buy stock under locks; exits 1 if anything is oversold",
        description="Runs a flash sale against Redis. With no --url and no REDIS_URL it starts a throwaway "
                    "redis-server on a free port and stops it afterwards.")
    demo.add_argument("--url", help="redis://, rediss:// or unix:// URL "
                                    "(default: $REDIS_URL, else a throwaway server)")
    demo.add_argument("--workers", type=_positive, default=8, help="buyer processes (default 8)")
    demo.add_argument("--items", type=_positive, default=10, help="items on sale (default 10)")
    demo.add_argument("--stock", type=_positive, default=100, help="stock per item (default 100)")
    demo.add_argument("--core", choices=("c", "py"), default=None,
                      help="force a core (default: the compiled one)")
    doctor = commands.add_parser(
        "doctor", help="check a server for locks: version and mode, persistence, eviction policy, "
                       "the user's permissions, round-trip time; exits 1 on a problem",
        description="Checks the Redis at URL before it is trusted with locks. Writes nothing but one "
                    "lock of its own (taken and released). Exit code 1 when a check finds a problem.")
    doctor.add_argument("url", help="redis://, rediss:// or unix:// URL of the server (or of a cluster node)")
    doctor.add_argument("--prefix", default="turbolock:",
                        help="the clients' key_prefix, its own lock's (default turbolock:)")
    _add_locks(commands)
    _add_bench(commands)
    return parser


def _add_bench(commands: Any) -> None:
    bench = commands.add_parser(
        "bench", help="turbolock against redis-py on your server: pairs, bulk, renewal, contention",
        description="Measures turbolock and redis-py (as installed here, with and without hiredis, and the "
                    "best hand-written redis-py code per workload) side by side, the order rotating every "
                    "repeat. Writes keys under bench: on the server and releases them. With no --url and "
                    "no REDIS_URL it starts a throwaway redis-server.")
    bench.add_argument("--url", help="redis://, rediss:// or unix:// URL (default: $REDIS_URL, "
                                     "else a throwaway server)")
    bench.add_argument("--core", choices=("c", "py"), default=None, help="turbolock's core (default: the "
                                                                        "compiled one when built)")
    bench.add_argument("--quick", action="store_true", help="small sizes and 3 repeats (about 10 s)")
    bench.add_argument("--repeats", type=_positive, default=None, help="repeats (default 5; --quick 3)")
    bench.add_argument("--only", metavar="WORKLOADS", help="comma-separated: pairs,bulk,renewal,contention")
    bench.add_argument("--json", metavar="PATH",
                       help="write samples, medians and ratios as JSON ('-': stdout)")
    bench.add_argument("--plot", metavar="FILE", help="draw the comparison to FILE.png or FILE.svg "
                                                      "(needs matplotlib: pip install 'turbolock[cli]')")


def _add_locks(commands: Any) -> None:
    locks = commands.add_parser("locks", help="list, inspect or force-release the locks on a server",
                                description="The locks on a server (SCAN, never KEYS; a cluster's every "
                                            "master). Tokens are never shown.")
    actions = locks.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="held locks under a prefix with the time they have left")
    inspecting = actions.add_parser("inspect", help="whether one lock is held, and for how long still")
    releasing = actions.add_parser("release", help="delete one lock whoever holds it (asks first)")
    for action in (listing, inspecting, releasing):
        action.add_argument("url", help="redis://, rediss:// or unix:// URL (or of a cluster node)")
        action.add_argument("--prefix", default="turbolock:",
                            help="the clients' key_prefix (default turbolock:)")
    listing.add_argument("--match", default="*", help="glob on the lock names (default *)")
    listing.add_argument("--limit", type=_positive, default=None, help="show at most this many")
    for action in (inspecting, releasing):
        action.add_argument("name", help="the lock's name, as given to the client")
    releasing.add_argument("--force", action="store_true", required=True,
                           help="required: the holder is not told and may still be working")
    releasing.add_argument("--yes", action="store_true", help="do not ask (for scripts)")


def _run_locks(args: argparse.Namespace) -> int:
    from turbolock import admin

    if args.action != "list":
        admin.lock_key(args.prefix, args.name)  # a bad name is bad input, before any connection
    server = admin.connect(args.url)
    try:
        if args.action == "list":
            count = 0
            for held in admin.held_locks(server, args.prefix, args.match, args.limit):
                print(held.line())
                count += 1
            print(f"{count} lock{'s' if count != 1 else ''}", file=sys.stderr)
            return 0
        if args.action == "inspect":
            found = admin.inspect(server, args.name, args.prefix)
            name = admin.shown(args.name)
            print(f"{name}: not held" if found is None else f"{name}: held, {found.left} left")
            return 0 if found is not None else 1
        return admin.confirm_release(server, args.name, args.prefix, args.yes, input, print)
    finally:
        server.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes: 0 done, 1 a check or the server failed (said on stderr, never a traceback),
    2 bad input."""
    args = build_parser().parse_args(argv)
    from redis.exceptions import RedisClusterException, RedisError

    from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError, LockError, ReplyError

    # A killed job (SIGTERM) cleans up as Ctrl-C does; only the main thread may set a handler.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupted) if main_thread else None
    try:
        return _run(args)
    except (InvalidArgumentError, InvalidArgumentTypeError) as exc:
        print(f"turbolock {args.command}: {exc}", file=sys.stderr)
        return 2
    except (LockError, RedisError, RedisClusterException, OSError) as exc:
        # redis-py's error text may quote a command's arguments back: shown as a reply's is
        said = str(ReplyError(str(exc)))
        print(f"turbolock {args.command}: {type(exc).__name__}: {said}", file=sys.stderr)
        return 1
    except EOFError:  # a question (release --force) with no terminal to answer it
        print(f"turbolock {args.command}: no answer (standard input is closed); pass --yes to go on "
              "without asking", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"turbolock {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM (a job killed, ``timeout``) as an interrupt: the throwaway server is stopped, the
    demo's buyers and keys go, instead of the process ending where it stands."""
    raise KeyboardInterrupt


def _run(args: argparse.Namespace) -> int:
    url = args.url if args.url is not None or args.command not in ("demo", "bench") else os.environ.get(
        "REDIS_URL")
    if url:  # checked before anything starts (the demo's worker processes)
        from turbolock.options import options_from_url

        options = options_from_url(url)
        if options.ssl:  # a TLS file that cannot be loaded is bad input, not a server out of reach
            options.ssl_context()
    if args.command == "demo":
        from turbolock.demo import main as demo_main

        return demo_main(args.url, args.workers, args.items, args.stock, args.core)
    if args.command == "locks":
        return _run_locks(args)
    if args.command == "bench":
        from turbolock.bench.command import main as bench_main

        return bench_main(args.url, args.core, args.quick, args.repeats, args.only, args.json, args.plot)
    if args.command == "doctor":
        from turbolock._wire.validate import check_key_prefix
        from turbolock.doctor import main as doctor_main

        check_key_prefix(args.prefix)  # bad input before any check runs
        return doctor_main(args.url, args.prefix)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
