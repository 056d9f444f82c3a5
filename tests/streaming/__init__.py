"""Tests of gprf.streaming."""
