"""Register gprf's types with BoTorch as soon as both packages are in use, without ever importing BoTorch.

BoTorch switches linear_operator's fast computations off when it is imported, so ``import gprf`` must not import
it. Once the user has imported BoTorch, its pathwise samplers should find gprf's feature kernels whichever of the
two packages came first: gprf registers when it is imported after BoTorch, and when a gprf feature kernel is built
after BoTorch was imported.
"""

from __future__ import annotations

import importlib
import sys


def register_with_botorch_if_imported() -> None:
    """Import :mod:`gprf.botorch` (its registrations) if BoTorch is imported and it is not yet."""
    if "botorch" in sys.modules and "gprf.botorch" not in sys.modules:
        importlib.import_module("gprf.botorch")
