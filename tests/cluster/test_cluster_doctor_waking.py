"""``turbolock doctor`` on every master of a cluster (one of which does not own
the doctor's channel's slot, and answers its SSUBSCRIBE with MOVED)."""

from __future__ import annotations

import pytest

from turbolock.cli import main
from turbolock.redis_cluster import RedisCluster


def test_doctor_says_waking_works_on_every_master(cluster: RedisCluster,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = {}
    for node in cluster.nodes:
        code = main(["doctor", node.url])
        out = capsys.readouterr().out
        if ", master" not in out.splitlines()[0]:
            continue
        assert code == 0, out
        verdicts[node.port] = [line for line in out.splitlines() if "waking:" in line]
    assert len(verdicts) >= 2
    assert all(lines and lines[0].startswith("ok") for lines in verdicts.values()), verdicts
