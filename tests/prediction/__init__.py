"""Tests of gprf.prediction."""
