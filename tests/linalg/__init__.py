"""Tests of gprf.linalg."""
