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
from gprf._botorch_hook import connect_botorch
from gprf.conversion import random_features
from gprf.exceptions import (
    DispatchFallbackWarning,
    GPRFWarning,
    LowRankStructureWarning,
    NonFiniteTrainingDataError,
    OversizedFeaturesWarning,
)
from gprf.fitting import fit_mll
from gprf.sizing import suggest_num_features

# gprf's entries in BoTorch's dispatchers: now if BoTorch is imported, else right after its import (never importing it).
connect_botorch()

__all__ = [
    "DispatchFallbackWarning",
    "GPRFWarning",
    "LowRankStructureWarning",
    "NonFiniteTrainingDataError",
    "OversizedFeaturesWarning",
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
    "suggest_num_features",
]
