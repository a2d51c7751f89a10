"""``turbolock bench --json PATH`` with a PATH that cannot be written exits 2 at once, as a bad
--plot or --only does; it was found out only after the whole measurement (minutes without
--quick), and the samples were lost. Found in review.
"""

from __future__ import annotations

import os
import subprocess
import sys

from turbolock.redis_server import RedisServer


def test_unwritable_json_target_is_refused_before_measuring(own_server: RedisServer,
                                                            tmp_path: object) -> None:
    target = os.path.join(str(tmp_path), "no-such-directory", "bench.json")
    done = subprocess.run([sys.executable, "-m", "turbolock", "bench", "--url", own_server.url, "--core",
                           "py", "--quick", "--only", "pairs", "--repeats", "1", "--json", target],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "repeat 1/1" not in done.stderr, "it measured everything first:\n" + done.stderr[-600:]
    assert done.returncode == 2, done.stderr[-600:]
