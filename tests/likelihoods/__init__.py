"""Tests of gprf.likelihoods."""
