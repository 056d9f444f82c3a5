"""Builders the suite shares across its folders (not tests, and not shipped: the shipped kit is gprf.testing)."""
