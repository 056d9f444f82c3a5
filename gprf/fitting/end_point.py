r"""Ending a fit at hyperparameters where the model can predict.

The marginal likelihood and the prediction cache factor different matrices (the exact scale refit an
eigendecomposition of :math:`\Phi^\top\Phi`, small problems an :math:`N\times N` covariance, prediction the
capacitance :math:`I + s\Phi^\top\Sigma^{-1}\Phi`), and in floating point the capacitance stops being numerically
positive definite once the rounding of its Gram, about :math:`u\,s\lambda_{\max}(\Phi^\top\Sigma^{-1}\Phi)`, reaches
its smallest eigenvalue 1 — e.g. high-degree polynomial sketches of unscaled inputs, whose features span many orders
of magnitude, at an outputscale the refit drove up along the flat ridge :math:`s/\ell^{2p}` = const. So a fit can
reach a point that scores well but cannot predict. :func:`end_where_predictable` builds the prediction cache at the
end point (one factorisation, then dropped) and, when it cannot be factored, sets the hyperparameters back to the
last checkpoint of the fit where it can, with a :class:`~gprf.exceptions.FitFallbackWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import gpytorch
import torch
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.errors import NanError, NotPSDError

from gprf.exceptions import FitFallbackWarning, NonFiniteTrainingDataError

#: The errors of a factorisation that fails at the current hyperparameters (as opposed to a wrong model or input).
NUMERICAL_FAILURES = (NotPSDError, NanError, NonFiniteTrainingDataError)

Checkpoint = tuple[str, list[torch.Tensor]]


def parameter_values(mll: ExactMarginalLogLikelihood) -> list[torch.Tensor]:
    """Copies of every parameter of the marginal likelihood (model and likelihood)."""
    return [parameter.detach().clone() for parameter in mll.parameters()]


def restore_parameter_values(mll: ExactMarginalLogLikelihood, values: Sequence[torch.Tensor]) -> None:
    with torch.no_grad():
        for parameter, value in zip(mll.parameters(), values, strict=True):
            parameter.copy_(value)


def _same_values(left: Sequence[torch.Tensor], right: Sequence[torch.Tensor]) -> bool:
    return all(torch.equal(a, b) for a, b in zip(left, right, strict=True))


def prediction_failure(mll: ExactMarginalLogLikelihood) -> Exception | None:
    """The numerical error that stops the model from building its prediction cache at its current hyperparameters,
    or ``None``; ``mll`` is left in eval mode without the cache.

    The cache is built by a prediction of the mean and variance at one training input (so every factor the
    posterior needs is formed), then dropped: the model's first real prediction builds its own under the settings
    in force there (BoTorch's posterior settings, say), as it would have without the check.
    """
    mll.train()  # drops caches built at other hyperparameters
    mll.eval()
    model = mll.model
    one_row = tuple(inputs[..., :1, :] for inputs in model.train_inputs)
    try:
        # debug off: with one training point, the test point equals the training data and GPyTorch would warn.
        with torch.no_grad(), gpytorch.settings.debug(False), gpytorch.settings.skip_posterior_variances(False):
            output = model(*one_row)
            torch.stack([output.mean, output.variance])  # forms the mean and the variance caches
    except NUMERICAL_FAILURES as error:
        return error
    finally:
        mll.train()
        mll.eval()
    return None


def end_where_predictable(
    mll: ExactMarginalLogLikelihood,
    checkpoints: Sequence[Checkpoint],
    failure: Exception | None = None,
    failure_of: Callable[[ExactMarginalLogLikelihood], Exception | None] = prediction_failure,
) -> None:
    """Leave ``mll`` in eval mode at its current hyperparameters if the model can predict there, else at the last of
    ``checkpoints`` (``(stage, parameter_values)``, oldest first) where it can, with a
    :class:`~gprf.exceptions.FitFallbackWarning` naming the stage. ``failure``: the numerical error of the current
    point when it is already known (then it is not checked again). ``failure_of``: the check at each point
    (:func:`prediction_failure`; rows sharded over processes check the capacitance of all of them).

    Raises:
        NotPSDError: The model cannot predict at any checkpoint (the parameters are left at the end point; the
            message says why and what to change). A :class:`~gprf.exceptions.NonFiniteTrainingDataError` at every
            checkpoint is re-raised as it is (the data are to blame).
    """
    if failure is None:
        failure = failure_of(mll)
    if failure is None:
        return
    end = parameter_values(mll)
    tried = end
    for stage, values in reversed(checkpoints):
        if _same_values(values, tried):
            continue
        tried = values
        restore_parameter_values(mll, values)
        if failure_of(mll) is None:
            warnings.warn(
                f"fit_mll: the model cannot predict at the hyperparameters the fit ended at ({_summary(failure)}); "
                f"they were set back to those after {stage}, the last point of the fit where the prediction cache "
                "factors. A usual cause: features of very different magnitudes make the capacitance "
                "I + s Phi^T Sigma^-1 Phi numerically singular at large outputscales; rescale the inputs (e.g. to "
                "the unit cube), or bound the outputscale or the lengthscale with a constraint or prior.",
                FitFallbackWarning,
                stacklevel=3,
            )
            return
    restore_parameter_values(mll, end)
    mll.train()
    if isinstance(failure, NonFiniteTrainingDataError):
        raise failure
    raise NotPSDError(
        f"fit_mll: the model cannot build its prediction cache at the fitted hyperparameters nor at any earlier "
        f"point of the fit, its start included ({_summary(failure)}): the capacitance I + s Phi^T Sigma^-1 Phi is "
        "not numerically positive definite. Its features span too many orders of magnitude (e.g. a high-degree "
        "polynomial sketch of inputs far from the unit ball): rescale the inputs, lower the degree, or raise the "
        "noise's lower bound. The parameters are left where the fit ended."
    ) from failure


def _summary(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no message'}"
