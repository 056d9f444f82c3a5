"""Pure tensor operations used by the feature maps (no GPyTorch imports)."""

from gprf.ops.fwht import fwht, next_power_of_two, pad_to_power_of_two
from gprf.ops.orthogonal import haar_orthogonal
from gprf.ops.qmc import sobol_normal, sobol_uniform

__all__ = ["fwht", "haar_orthogonal", "next_power_of_two", "pad_to_power_of_two", "sobol_normal", "sobol_uniform"]
