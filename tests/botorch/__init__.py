"""Tests of gprf.botorch."""
