"""The fault suite (issue #16): worker processes take a lock, read a counter on a separate
resource server, write it plus one and release, while a fault is injected; a checker then reads
the recorded history for what the lock promises (``_checker``) and each test asserts its fault's
expectation. ``conftest.py`` prints a summary table at the end of the run.

Files: ``_history`` (what is recorded) and ``_checker`` (pure functions over it); ``_workload``
(what the workers do), ``_flow`` (the worker loop, once for both front ends), ``_recorder``,
``_resource`` and ``_worker`` (a worker process); ``_topology`` (the lock servers), ``_faults``
(the injectors), ``_run`` (one fault, start to findings), ``_expect`` (the verdicts) and
``_summary`` (the table).
"""
