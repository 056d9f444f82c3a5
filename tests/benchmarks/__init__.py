"""Tests of the repository's benchmarks (``python -m benchmarks``)."""
