"""Hypothesis settings of the adversarial suite's property-based tests."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

#: Derandomised (the same examples on every run), no example database, no deadline, few examples: the properties
#: are checks a run either always passes or always fails, and the folder stays fast on one core.
PROPERTIES = settings(
    derandomize=True, database=None, deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow]
)
