r"""Handing the exact refit's Gram matrix to the model's prediction cache, so the first prediction does not form it.

The refit forms :math:`G = \Phi^\top\Phi` and :math:`P = \Phi^\top[\,y - m_0,\ \mathbf 1\,]` over all training rows
(:class:`~gprf.fitting.FeatureSums`). At the fitted outputscale :math:`s`, noise :math:`\sigma^2` and constant mean
:math:`c` the weight posterior of feature-space prediction (:class:`~gprf.prediction.FeatureSpacePredictionStrategy`)
is :math:`N(C^{-1}b, C^{-1})` with

.. math::
    C = I + \frac{s}{\sigma^2}\,G, \qquad b = \frac{\sqrt s}{\sigma^2}\,(P_{:,1} - c\,P_{:,2}),

the strategy's own formulas for :math:`\Sigma = \sigma^2 I` and the residual :math:`y - m_0 - c\mathbf 1`. Factoring
:math:`C` (:math:`F^3/3`) is also the fit's check that the model can predict where it ends
(:mod:`gprf.fitting.end_point`). The posterior goes to the strategy GPyTorch's ``ExactGP`` would build at the first
prediction, built the same public way (the prior at the training inputs, ``prediction_strategy``) and set as the
model's ``prediction_strategy``. That strategy stamps the model's state when it is built, so any change afterwards
(a hyperparameter, a new feature draw, ``model.train()``, new training data) drops the handed-over posterior and the
next prediction builds its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gpytorch
import torch
from gpytorch.means import ConstantMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models.exact_prediction_strategies import prediction_strategy

from gprf.features.versions import state_versions
from gprf.fitting.end_point import NUMERICAL_FAILURES, Checkpoint, end_where_predictable
from gprf.fitting.scale_statistics import FeatureSums
from gprf.linalg import CapacitanceFactor, feature_root
from gprf.prediction import FeatureSpacePredictionStrategy, WeightSpacePosterior


def _model_state(mll: ExactMarginalLogLikelihood) -> tuple:
    model = mll.model
    return state_versions(model.covar_module, mll.likelihood, model.mean_module)


@dataclass(frozen=True)
class RefitGram:
    """The sums of an exact refit and the state of the model they were fitted at (hyperparameters and draws)."""

    sums: FeatureSums
    state: tuple

    @classmethod
    def after_refit(cls, mll: ExactMarginalLogLikelihood, sums: FeatureSums | None) -> RefitGram | None:
        """Stamp ``sums`` with the model's state right after the refit wrote its hyperparameters; ``None`` for no sums
        (a refit on the points route forms no Gram of the features:
        :func:`~gprf.fitting.scale_fit.fit_scale_with_sums`)."""
        return None if sums is None else cls(sums, _model_state(mll))

    def is_current(self, mll: ExactMarginalLogLikelihood) -> bool:
        """Whether nothing of the model changed since the refit (else the sums belong to other hyperparameters)."""
        return _model_state(mll) == self.state


def end_with_refit(mll: ExactMarginalLogLikelihood, refit: RefitGram | None, checkpoints: Sequence[Checkpoint]) -> bool:
    """End the fit in eval mode where the model can predict (:func:`~gprf.fitting.end_point.end_where_predictable`),
    with the refit's posterior handed to the model's prediction strategy where it applies; whether it was handed
    over.

    It applies when ``refit`` is current and the model's strategy predicts from the root's own weight posterior
    (:attr:`~gprf.prediction.FeatureSpacePredictionStrategy.adopts_root_posterior`); then factoring the capacitance is
    the end check, and a failure sends the fit back to the last checkpoint where the model can predict.
    """
    if refit is None or not refit.is_current(mll):
        end_where_predictable(mll, checkpoints)
        return False
    strategy = _new_prediction_strategy(mll)
    if not isinstance(strategy, FeatureSpacePredictionStrategy) or not strategy.adopts_root_posterior:
        end_where_predictable(mll, checkpoints)
        return False
    try:
        posterior = _refit_posterior(mll, refit.sums)
    except NUMERICAL_FAILURES as failure:
        end_where_predictable(mll, checkpoints, failure=failure)
        return False
    strategy.adopt_posterior(posterior)
    mll.model.prediction_strategy = strategy
    return True


def _new_prediction_strategy(mll: ExactMarginalLogLikelihood) -> object:
    """The prediction strategy the model's first prediction would build, built now; ``mll`` is put in eval mode.

    As GPyTorch's ``ExactGP.__call__`` builds it: the prior at the training inputs (``prior_mode``) handed to
    ``gpytorch.models.exact_prediction_strategies.prediction_strategy``, which asks the kernel for its strategy.
    """
    mll.eval()  # BoTorch models switch to their transformed training inputs here
    model = mll.model
    train_inputs = list(model.train_inputs)
    with gpytorch.settings.prior_mode(True):
        train_prior = model(*train_inputs)
    return prediction_strategy(
        train_inputs=train_inputs,
        train_prior_dist=train_prior,
        train_labels=model.train_targets,
        likelihood=mll.likelihood,
    )


def _refit_posterior(mll: ExactMarginalLogLikelihood, sums: FeatureSums) -> WeightSpacePosterior:
    r"""The weight posterior at the model's scale hyperparameters from the refit's sums (module docstring).

    Consumes ``sums`` (:math:`G` is scaled in place where its shape allows, so no second :math:`F\times F` matrix
    is held). Raises what factoring the capacitance raises where the model cannot predict.
    """
    model = mll.model
    dtype, device = sums.gram.dtype, sums.gram.device
    with torch.no_grad():
        # The whole amplitude of the root and the draw versions, read from one row as prediction reads them.
        root = feature_root(model.covar_module(model.train_inputs[0][..., :1, :]))
        outputscale = torch.ones((), dtype=dtype, device=device)
        if root.outputscale is not None:
            outputscale = root.outputscale.to(dtype)
        noise = mll.likelihood.noise.to(dtype).squeeze(-1)
        mean = model.mean_module
        constant = torch.zeros((), dtype=dtype, device=device)
        if isinstance(mean, ConstantMean):
            constant = mean.constant.to(dtype)
        ratio = (outputscale / noise).unsqueeze(-1).unsqueeze(-1)
        gram = sums.gram
        gram = gram.mul_(ratio) if torch.broadcast_shapes(gram.shape, ratio.shape) == gram.shape else gram * ratio
        factor = CapacitanceFactor.from_gram(gram)
        del gram
        residual_projection = sums.projections[..., 0] - constant.unsqueeze(-1) * sums.projections[..., 1]
        rhs = (outputscale.sqrt() / noise).unsqueeze(-1) * residual_projection
        weights = factor.solve(rhs.unsqueeze(-1)).squeeze(-1)
    return WeightSpacePosterior(factor, rhs, weights, root.versions)
