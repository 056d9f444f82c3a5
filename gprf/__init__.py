"""gprf: random-feature kernel approximations as first-class GPyTorch kernels and BoTorch models."""

__version__ = "0.1.0"

from gprf import (
    conversion,
    distributions,
    features,
    fitting,
    kernels,
    likelihoods,
    linalg,
    metrics,
    ops,
    prediction,
    settings,
    streaming,
)
from gprf._botorch_hook import register_with_botorch_if_imported
from gprf.conversion import random_features
from gprf.exceptions import (
    DispatchFallbackWarning,
    GPRFWarning,
    LowRankStructureWarning,
    NonFiniteTrainingDataError,
)
from gprf.fitting import fit_mll

# BoTorch already imported: register gprf's types with its dispatchers now (gprf itself never imports BoTorch).
register_with_botorch_if_imported()

__all__ = [
    "DispatchFallbackWarning",
    "GPRFWarning",
    "LowRankStructureWarning",
    "NonFiniteTrainingDataError",
    "__version__",
    "conversion",
    "distributions",
    "features",
    "fit_mll",
    "fitting",
    "kernels",
    "likelihoods",
    "linalg",
    "metrics",
    "ops",
    "prediction",
    "random_features",
    "settings",
    "streaming",
]
