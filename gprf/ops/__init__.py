"""Pure tensor operations used by the feature maps (no GPyTorch imports)."""

from gprf.ops.butterfly import butterfly_apply, butterfly_matrix, random_butterfly
from gprf.ops.clustering import Clustering, farthest_point_clustering, nearest_center
from gprf.ops.fwht import fwht, next_power_of_two, pad_to_power_of_two
from gprf.ops.orthogonal import haar_orthogonal
from gprf.ops.qmc import sobol_normal, sobol_uniform
from gprf.ops.simplex import simplex_project, simplex_vertices
from gprf.ops.trig import cos_sin

__all__ = [
    "Clustering",
    "butterfly_apply",
    "butterfly_matrix",
    "cos_sin",
    "farthest_point_clustering",
    "fwht",
    "haar_orthogonal",
    "nearest_center",
    "next_power_of_two",
    "pad_to_power_of_two",
    "random_butterfly",
    "simplex_project",
    "simplex_vertices",
    "sobol_normal",
    "sobol_uniform",
]
