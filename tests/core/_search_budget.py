"""How hard the property tests search: a small, fixed search in CI, a longer random one by hand.

``TURBOLOCK_HYPOTHESIS_PROFILE=long`` runs 50x the examples from a fresh random seed each run
(and remembers failures in .hypothesis/); the default, ``ci``, replays the same examples every
run, so the suite's time and outcome do not depend on luck.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_PROFILES = {"ci": 1, "long": 50}
PROFILE = os.environ.get("TURBOLOCK_HYPOTHESIS_PROFILE", "ci")
if PROFILE not in _PROFILES:
    raise ValueError(f"TURBOLOCK_HYPOTHESIS_PROFILE must be one of {sorted(_PROFILES)}, not {PROFILE!r}")


def budget(examples: int) -> settings:
    """Settings for a test that runs ``examples`` examples in CI."""
    ci = PROFILE == "ci"
    return settings(
        max_examples=examples * _PROFILES[PROFILE],
        deadline=None,  # the machine is shared: a slow example is not a failure
        derandomize=ci,
        database=None if ci else settings.default.database,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
