"""Tests of gprf.ops."""
