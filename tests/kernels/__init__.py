"""Tests of gprf.kernels."""
