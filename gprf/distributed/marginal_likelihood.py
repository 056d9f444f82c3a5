r"""The exact marginal likelihood of a random-feature GP whose training rows are sharded over processes.

Each rank :math:`r` holds rows :math:`(X_r, y_r)` and forms its share of the sums (:mod:`gprf.streaming.statistics`)

.. math::
    G_r = \Phi_r^\top\Sigma_r^{-1}\Phi_r, \quad b_r = \Phi_r^\top\Sigma_r^{-1}(y_r - \mu_r), \quad
    q_r = (y_r - \mu_r)^\top\Sigma_r^{-1}(y_r - \mu_r), \quad s_r = \log|\Sigma_r|, \quad N_r,

one all-reduce adds them up (:mod:`gprf.distributed.sums`), and every rank evaluates the same

.. math::
    \mathcal L = -\tfrac{1}{2N}\big(q - b^\top C^{-1}b + \log\det C + s + N\log 2\pi\big), \qquad C = I + G,

the whole data's marginal likelihood per point, as GPyTorch's ``ExactMarginalLogLikelihood`` reports it on one
process. Its gradient is :math:`\sum_r \langle\partial\mathcal L/\partial S, \partial S_r/\partial\theta\rangle` over
the sums :math:`S = (G, b, q, s)`: :math:`\partial\mathcal L/\partial S` is the same on every rank, so each rank
back-propagates it into its own rows (the chunked Gram recomputes their features, memory :math:`O(\text{chunk}\cdot
F + F^2)`), and one all-reduce of the :math:`P` hyperparameter gradients in the backward pass sums the ranks'
shares. After ``loss.backward()`` every rank's ``.grad`` is the single-process gradient: a plain optimizer loop,
:func:`gprf.fit_mll` and L-BFGS work unchanged, with identical parameters on every rank after each step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from gpytorch import settings
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import _GaussianLikelihoodBase
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from torch import Tensor
from torch.autograd.function import once_differentiable

from gprf.distributed.exchange import ShardExchange, dtype_code
from gprf.distributed.fit_placement import ShardedRows
from gprf.distributed.identity import model_identity, transform_state
from gprf.distributed.sums import ShardParts, sum_over_ranks
from gprf.kernels import is_feature_kernel
from gprf.linalg import feature_root
from gprf.streaming.statistics import SufficientStatistics

_SUM_STEP = "marginal likelihood"
_GRADIENT_STEP = "marginal likelihood gradient"
# G, b, q and sum(log noise): only G is a (batch of) symmetric matrices.
_SYMMETRIC = (True, False, False, False)


def local_marginal_sums(output: MultivariateNormal, target: Tensor) -> list[Tensor]:
    r"""This rank's :math:`(G_r, b_r, q_r, s_r)` of the marginal distribution ``output`` (the likelihood applied to the
    model's prior at the rank's rows) and ``target``, differentiable, in the factor dtype; formed as the single-process
    marginal likelihood forms them (:meth:`gprf.linalg.FeatureRoot.sums`), so without an :math:`N\times F` root when
    it is lazy.

    Raises:
        TypeError: The covariance is not a gprf feature root with a Gaussian likelihood's noise.
    """
    root = feature_root(output.lazy_covariance_matrix)
    if root is None or root.noise is None:
        raise TypeError(
            "ShardedMarginalLogLikelihood needs the covariance of a gprf random-feature covar_module (alone, in "
            "ScaleKernel or in a gprf feature sum) plus a Gaussian likelihood's noise; this model's covariance has no "
            "feature root."
        )
    residual = target - output.mean
    gram, projection = root.sums(residual.unsqueeze(-1))
    noise = root.noise.to(gram.dtype)
    quadratic = (residual.to(gram.dtype).square() / noise).sum(-1)
    log_noise = noise.log().expand(*noise.shape[:-1], root.num_points).sum(-1)
    return [gram, projection.squeeze(-1), quadratic, log_noise]


@dataclass
class _GradientShare:
    """What the backward pass of the sum needs: this rank's sums with their graph and the parameters."""

    exchange: ShardExchange
    local: list[Tensor]
    totals: list[Tensor]
    parameters: list[Tensor]

    def local_gradient(self, upstream: tuple[Tensor, ...]) -> Tensor:
        """This rank's share :math:`\\langle\\bar S, \\partial S_r/\\partial\\theta\\rangle` of every parameter's
        gradient, flattened in float64 (zeros where the rank's sums do not depend on a parameter)."""
        pairs = [(local, grad) for local, grad in zip(self.local, upstream, strict=True) if local.requires_grad]
        grads = [None] * len(self.parameters)
        if pairs:
            outputs, grad_outputs = zip(*pairs, strict=True)
            # retain_graph: nodes shared with the rest of the loss (a lengthscale transform that a prior also reads)
            # are still to be traversed by the outer backward pass.
            grads = torch.autograd.grad(outputs, self.parameters, grad_outputs, retain_graph=True, allow_unused=True)
        flat = [
            torch.zeros(p.numel(), dtype=torch.float64, device=p.device) if g is None else g.reshape(-1).double()
            for p, g in zip(self.parameters, grads, strict=True)
        ]
        return torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)


class _ShardedSum(torch.autograd.Function):
    """The summed statistics as a function of the parameters: forward hands out the sums already all-reduced,
    backward sums the ranks' gradient shares (module docstring)."""

    @staticmethod
    def forward(ctx, share: _GradientShare, *parameters: Tensor) -> tuple[Tensor, ...]:
        ctx.share = share
        return tuple(total.clone() for total in share.totals)

    @staticmethod
    @once_differentiable
    def backward(ctx, *upstream: Tensor) -> tuple[Tensor | None, ...]:
        share: _GradientShare = ctx.share
        numbers = sum(p.numel() for p in share.parameters)
        try:
            local, failure = share.local_gradient(upstream), None
        except Exception as error:  # every rank must still reach the collective: it raises there, on every rank
            local, failure = None, error
        share.exchange.agree(_GRADIENT_STEP, [("the number of gradient values", numbers)], failure=failure)
        total = share.exchange.all_reduce(_GRADIENT_STEP, local)
        grads = []
        for parameter, grad, needed in zip(
            share.parameters, total.split([p.numel() for p in share.parameters]), ctx.needs_input_grad[1:], strict=True
        ):
            grads.append(grad.view_as(parameter).to(device=parameter.device, dtype=parameter.dtype) if needed else None)
        return (None, *grads)


class ShardedMarginalLogLikelihood(ExactMarginalLogLikelihood):
    r"""GPyTorch's ``ExactMarginalLogLikelihood`` for a model whose training rows are split over the ranks of a
    ``torch.distributed`` process group (module docstring).

    Build the model on every rank with the same seed and hyperparameters (or load one ``state_dict`` everywhere) and
    that rank's rows as its training data (an empty shard, ``x[:0]``, is valid), then use it as the single-process
    marginal likelihood, on every rank::

        mll = gprf.distributed.ShardedMarginalLogLikelihood(likelihood, model)
        loss = -mll(model(train_x_shard), train_y_shard)   # the whole data's value on every rank
        loss.backward()                                    # every rank's .grad: the whole data's gradient
        optimizer.step()

    or ``gprf.fit_mll(mll, ...)``. Gradients are summed over the ranks inside ``backward`` (do not wrap the model in
    ``DistributedDataParallel`` or average them yourself); they reach the parameters of the model and the likelihood,
    not other tensors requiring gradients. Every rank must make the same calls in the same order (one forward, one
    backward), and priors and added loss terms count once, as on one process. Before each sum the ranks compare their
    layouts and fingerprints: different numbers of features, input dimensions, dtypes or device types, random
    features, hyperparameters, noise or mean raise :class:`~gprf.exceptions.ShardMismatchError` on every rank; an
    exception on one rank is raised on every rank; a collective that times out raises
    :class:`~gprf.exceptions.CollectiveError`.

    Args:
        likelihood: The model's Gaussian likelihood.
        model: An ``ExactGP`` whose ``covar_module`` is a gprf feature kernel, holding this rank's rows.
        group: The process group (default: the world); ``torch.distributed`` must be initialised.

    Attributes:
        exchange: The :class:`~gprf.distributed.exchange.ShardExchange` of its collectives (``exchange.log`` counts
            the communicated bytes per step).
    """

    def __init__(self, likelihood: _GaussianLikelihoodBase, model: ExactGP, group=None) -> None:
        super().__init__(likelihood, model)
        if not isinstance(model, ExactGP) or not is_feature_kernel(getattr(model, "covar_module", None)):
            raise TypeError(
                "ShardedMarginalLogLikelihood needs an ExactGP whose covar_module is a gprf random-feature kernel "
                f"(optionally in ScaleKernel), got {type(model).__name__}."
            )
        self.exchange = ShardExchange(group)
        self._placement = ShardedRows(self.exchange)

    @property
    def row_placement(self) -> ShardedRows:
        """How :func:`gprf.fit_mll` reaches the other ranks' rows (:mod:`gprf.fitting.placement`)."""
        return self._placement

    def forward(self, function_dist: MultivariateNormal, target: Tensor, *params, **kwargs) -> Tensor:
        if not isinstance(function_dist, MultivariateNormal):
            raise TypeError(
                "ShardedMarginalLogLikelihood takes the model's MultivariateNormal, got "
                f"{type(function_dist).__name__}."
            )
        if settings.observation_nan_policy.value() != "ignore":
            raise ValueError(
                "ShardedMarginalLogLikelihood does not support gpytorch.settings.observation_nan_policy "
                f"{settings.observation_nan_policy.value()!r}: remove the missing observations from each shard."
            )
        parameters = [p for p in self.parameters() if p.requires_grad] if torch.is_grad_enabled() else []
        local = None
        try:
            local = local_marginal_sums(self.likelihood(function_dist, *params, **kwargs), target)
            parts, failure = self._parts(local, target, parameters), None
        except Exception as error:  # raised on every rank by the sum below, so that none waits for the others
            parts, failure = None, error
        totals = sum_over_ranks(self.exchange, _SUM_STEP, parts, failure)
        sums = totals.sums
        if parameters:
            sums = _ShardedSum.apply(_GradientShare(self.exchange, local, totals.sums, parameters), *parameters)
        num_data = totals.num_rows
        gram, rhs, quadratic, log_noise = sums
        statistics = SufficientStatistics(
            gram,
            rhs,
            quadratic,
            log_noise,
            num_data=torch.tensor(float(num_data), dtype=gram.dtype, device=gram.device),
            fingerprint=parts.fingerprint,
            input_dim=self.model.train_inputs[0].size(-1),
        )
        value = statistics.log_marginal_likelihood().to(function_dist.mean.dtype)
        return self._add_other_terms(value, params) / num_data

    def _parts(self, local: list[Tensor], target: Tensor, parameters: list[Tensor]) -> ShardParts:
        inputs = self.model.train_inputs[0]
        root_dim = local[0].size(-1)
        return ShardParts(
            sums=local,
            symmetric=_SYMMETRIC,
            rows=target.size(-1),
            fingerprint=model_identity(self.model, inputs.size(-1)),
            root_dim=root_dim,
            transforms=transform_state(self.model),
            agreed=[
                ("the number of features", root_dim),
                ("the input dimension", inputs.size(-1)),
                ("the model dtype", dtype_code(inputs.dtype)),
                ("the number of gradient values", sum(p.numel() for p in parameters)),
            ],
        )
