"""A blocking acquire waits on through a Redis Cluster being changed (``ClusterError``: a slot
with no master while a failover settles, no slot map yet, another call's map read under way
at the attempt's deadline) as through a server that cannot be reached: while its wait has an
end. It ended the wait at once (CI: a waiter through a manual failover got "no master serves
slot" instead of the lock released after it). Which errors a wait goes on after is one rule
(``lock_rules.worth_retrying``), checked here for each kind."""

from __future__ import annotations

import pytest

from turbolock import AuthenticationError, ClusterError, ConnectionError, ProtocolError, TimeoutError
from turbolock._flows.lock_rules import worth_retrying


@pytest.mark.parametrize("error", [ClusterError("no master serves slot 5336"), ConnectionError("refused"),
                                   TimeoutError("no reply")], ids=repr)
def test_a_wait_with_an_end_goes_on_after_a_cluster_or_connection_failure(error: Exception) -> None:
    assert worth_retrying(error, 5.0)
    assert not worth_retrying(error, None)  # an endless wait never hides an outage
    assert not worth_retrying(error, 0.0)  # a single try


@pytest.mark.parametrize("error", [AuthenticationError("bad password"), ProtocolError("not Redis")], ids=repr)
def test_refused_credentials_and_a_server_that_is_not_redis_end_the_wait(error: Exception) -> None:
    assert not worth_retrying(error, 5.0)
