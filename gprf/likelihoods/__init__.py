"""Dirichlet-based GP classification (Milios et al. 2018) as a GPyTorch likelihood, model and predictors.

Reference: D. Milios, R. Camoriano, P. Michiardi, L. Rosasco, M. Filippone. *Dirichlet-based Gaussian Processes for
Large-scale Calibrated Classification.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
"""

from gprf.likelihoods.classification import class_marginals, predict, predict_proba
from gprf.likelihoods.dirichlet import DirichletClassificationLikelihood, dirichlet_transform
from gprf.likelihoods.models import DirichletGPModel

__all__ = [
    "DirichletClassificationLikelihood",
    "DirichletGPModel",
    "class_marginals",
    "dirichlet_transform",
    "predict",
    "predict_proba",
]
