"""gprf: random-feature kernel approximations as first-class GPyTorch kernels and BoTorch models."""

__version__ = "0.1.0"

from gprf import features, kernels, likelihoods, metrics, operators, ops, prediction, settings, streaming  # noqa: E402
from gprf.exceptions import DispatchFallbackWarning, LowRankStructureWarning  # noqa: E402

__all__ = [
    "DispatchFallbackWarning",
    "LowRankStructureWarning",
    "__version__",
    "features",
    "kernels",
    "likelihoods",
    "metrics",
    "operators",
    "ops",
    "prediction",
    "settings",
    "streaming",
]
