"""The network between the workers and the lock server, through the loopback proxy (iptables,
nft and netem are not available here): black-holed, one direction dropped, delayed."""

from __future__ import annotations

import pytest

from turbolock.redis_server import RedisServer

from ._expect import expect_safe
from ._faults import Network
from ._run import run_fault
from ._topology import Topology

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", list(Network.MODES))
def test_network_fault(resource_server: RedisServer, mode: str) -> None:
    with Topology(proxied=True) as topology:
        expect_safe(run_fault(Network(mode), topology, resource_server))
