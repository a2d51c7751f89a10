"""Multi-process seed scenarios: real workloads that only stay correct if the locks exclude.

Every scenario runs several OS processes (the "forkserver" start method, so no state leaks
from the test process), each with its own ``LockClient`` made from the server URL and the core
name, against the real redis-server of the session. Shared data lives in plain Redis keys
that the workers read-modify-write with GET then SET: only the lock keeps updates from
being lost, so a lock that fails to exclude shows up as a wrong count.
"""
