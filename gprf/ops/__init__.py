"""Pure tensor operations used by the feature maps (no GPyTorch imports)."""

from gprf.ops.butterfly import butterfly_apply, butterfly_matrix, random_butterfly
from gprf.ops.fwht import fwht, next_power_of_two, pad_to_power_of_two
from gprf.ops.orthogonal import haar_orthogonal
from gprf.ops.qmc import sobol_normal, sobol_uniform
from gprf.ops.simplex import simplex_project, simplex_vertices

__all__ = [
    "butterfly_apply",
    "butterfly_matrix",
    "fwht",
    "haar_orthogonal",
    "next_power_of_two",
    "pad_to_power_of_two",
    "random_butterfly",
    "simplex_project",
    "simplex_vertices",
    "sobol_normal",
    "sobol_uniform",
]
