"""The adversarial suite: bad, extreme and inconsistent inputs to every public entry point of gprf, each asserting the
right value or the exact error type and a fragment of its message (one file per entry point, not per module).

Property-based tests run with :data:`tests.helpers.properties.PROPERTIES` (derandomised, no example database, no
deadline, few examples), so that the folder runs in about a minute on one core.
"""
