"""turbolock's benchmarks: pytest-benchmark files and the comparison runner.

``python -m benchmarks.compare`` measures turbolock (both cores) against redis-py and the
server's own ceiling (redis-benchmark) in one run and prints a table of medians and ratios.
``python -m pytest benchmarks --benchmark-only`` runs the codec and end-to-end benchmarks.
"""

from __future__ import annotations

import importlib.util
import os
import sys

# From a checkout that was never installed (no `pip install -e .`), take turbolock from src/.
if importlib.util.find_spec("turbolock") is None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
