"""The ``turbolock`` command: ``turbolock demo`` runs the flash-sale demo, ``turbolock doctor URL``
checks a server before it is trusted with locks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turbolock", description="Fast distributed locks on Redis.")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from turbolock.demo import main as demo_main

        return demo_main(args.url, args.workers, args.items, args.stock, args.core)
    if args.command == "doctor":
        from turbolock.doctor import main as doctor_main
        from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError

        try:
            return doctor_main(args.url)
        except (InvalidArgumentError, InvalidArgumentTypeError) as exc:
            print(f"turbolock doctor: {exc}", file=sys.stderr)
            return 2
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
