"""An auto-renewed Redlock lease whose extend got no quorum (a majority of masters stopped)
believes the shorter of its two possible validities, and the renewer renews it by that belief,
as on one server (tests/test_renewal_after_unanswered_extend.py): the Redlock extend paths call
the same helper. Before, a 10 s lease extended to 1 s without a quorum ran past its believed
validity, neither renewed nor reported lost."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from turbolock import QuorumError, RedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the renewer's rule: no core's own


@pytest.mark.parametrize("call", ["extend", "extend_many"])
def test_a_renewed_redlock_lease_whose_extend_got_no_quorum_is_renewed_by_its_new_belief(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str, call: str) -> None:
    servers = own_masters(3)
    with RedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                       node_timeout=0.2) as client:
        lease = client.try_acquire("job", 10, auto_renew=True)  # due for renewal at ~6.7 s
        assert lease is not None
        for server in servers[1:]:
            server.pause()
        try:
            with pytest.raises(QuorumError):
                client.extend(lease, 1) if call == "extend" else client.extend_many([lease], 1)
        finally:
            for server in servers[1:]:
                server.resume()
        assert lease.valid_for() < 1.0  # it may have run on a majority: a 1 s validity believed
        time.sleep(lease.valid_for() + 0.3)
        valid_for, lost = lease.valid_for(), lease.is_lost
    assert not lost and valid_for > 0, (f"past its believed validity: lost={lost}, "
                                        f"valid_for={valid_for:.2f} (not renewed)")
