"""Tests of gprf.features."""
