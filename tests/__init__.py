"""The gprf test suite: one test module per source module, ``tests/<package>/test_<module>.py``.

The folders are packages so that modules of equal names in different source packages (``gprf/features/maclaurin.py``
and ``gprf/kernels/maclaurin.py``) get test modules of equal names (``tests.features.test_maclaurin``,
``tests.kernels.test_maclaurin``).
"""
