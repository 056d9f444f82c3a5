"""Tests of gprf.testing, the shipped test kit."""
