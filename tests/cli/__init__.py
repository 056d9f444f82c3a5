"""Tests of gprf.cli."""
