"""Hypothesis settings of the adversarial suite's property-based tests."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

#: Derandomised, no example database, no deadline, few examples, so the folder stays fast on one core. Derandomised
#: means seeded from the test's source, not a fixed list of examples: Hypothesis also draws numbers and strings that
#: appear as constants in the project modules the session has imported, so which 25 examples a test gets changes
#: with the tests collected beside it and with the code. A property must therefore hold for every input; damage
#: confined to a few bytes is tested exhaustively (as in tests/adversarial/test_cli_loaders.py), not left to a draw.
PROPERTIES = settings(
    derandomize=True, database=None, deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow]
)
