"""Fixtures of the prediction tests."""

from __future__ import annotations

import pytest

from gprf.testing import regression_data


@pytest.fixture
def data64():
    return regression_data()
