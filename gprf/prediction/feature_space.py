r"""Feature-space (weight-space) prediction for GPs whose kernel is a low-rank feature root.

With :math:`K = RR^\top` (:math:`R\in\mathbb R^{N\times F}`, ScaleKernel amplitude included) and
Gaussian noise :math:`\Sigma = \mathrm{diag}(\sigma_i^2)`, the GP is the Bayesian linear model
:math:`f(x) = \phi(x)^\top w`, :math:`w\sim N(0, I_F)`, whose posterior is

.. math::
    w \mid y \sim N\big(C^{-1}R^\top\Sigma^{-1}(y - \mu),\; C^{-1}\big), \qquad C = I + R^\top\Sigma^{-1}R,

so the predictive mean is :math:`\mu(x_*) + \phi_*^\top C^{-1}R^\top\Sigma^{-1}(y-\mu)` and the predictive
covariance is :math:`\phi_*^\top C^{-1}\phi_* = (L^{-1}\phi_*)^\top(L^{-1}\phi_*)` — identical to the
function-space formulas by the Woodbury identity, at :math:`O(NF^2)` once and :math:`O(MF^2)` per
prediction. :math:`C` is formed and factored in float64 whatever the model dtype.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import torch
from gpytorch import settings
from gpytorch.distributions import MultitaskMultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.lazy import LazyEvaluatedKernelTensor
from gpytorch.models.exact_prediction_strategies import DefaultPredictionStrategy
from gpytorch.utils.memoize import add_to_cache, cached, clear_cache_hook
from linear_operator.operators import (
    BatchRepeatLinearOperator,
    DenseLinearOperator,
    LinearOperator,
    LowRankRootLinearOperator,
    ZeroLinearOperator,
)
from torch import Tensor

from gprf.exceptions import DispatchFallbackWarning
from gprf.features import FeatureMap
from gprf.prediction.capacitance import CapacitanceFactor
from gprf.prediction.roots import noise_diagonal, symmetric_root

_FACTOR_DTYPE = torch.float64


@dataclass(frozen=True)
class WeightSpacePosterior:
    r"""Posterior of the feature weights: :math:`N(C^{-1}b, C^{-1})` with :math:`b = R^\top\Sigma^{-1}(y-\mu)`."""

    factor: CapacitanceFactor
    rhs: Tensor  # b, shape (..., F)
    mean: Tensor  # C^{-1} b, shape (..., F)
    feature_versions: tuple[int, ...] = ()  # draw versions of the kernel's feature maps when it was built


def _kernel_of(covar: object) -> Kernel | None:
    """The kernel behind a (batch-repeated) lazily evaluated kernel covariance."""
    while isinstance(covar, BatchRepeatLinearOperator):
        covar = covar.base_linear_op
    return covar.kernel if isinstance(covar, LazyEvaluatedKernelTensor) else None


def feature_versions(kernel: Kernel | None) -> tuple[int, ...]:
    if kernel is None:
        return ()
    return tuple(module.draw_version for module in kernel.modules() if isinstance(module, FeatureMap))


def _solve_vector(factor: CapacitanceFactor, rhs: Tensor) -> Tensor:
    return factor.solve(rhs.unsqueeze(-1)).squeeze(-1)


class FeatureSpacePredictionStrategy(DefaultPredictionStrategy):
    """GPyTorch prediction strategy of every gprf random-feature kernel (see the module docstring).

    Honours ``gpytorch.settings.skip_posterior_variances`` and ``detach_test_caches``; heteroscedastic
    and batched Gaussian noise; fantasies (``get_fantasy_model``, BoTorch ``fantasize`` and
    ``condition_on_observations``) by a rank-``m`` update of the float64 capacitance factor
    (:class:`~gprf.prediction.capacitance.CapacitanceFactor`), never an :math:`(N+m)^2` matrix. When the
    covariances it receives are not feature roots (e.g. a random-feature kernel added to a dense kernel)
    it warns with :class:`~gprf.exceptions.DispatchFallbackWarning` and uses GPyTorch's default strategy.
    """

    def __init__(self, train_inputs, train_prior_dist, train_labels, likelihood, root=None, inv_root=None):
        super().__init__(train_inputs, train_prior_dist, train_labels, likelihood, root=root, inv_root=inv_root)
        self._kernel = _kernel_of(train_prior_dist.lazy_covariance_matrix)

    def _weight_features(self, root: Tensor) -> Tensor:
        """The features of the weight-space model, from a real root (float64 here)."""
        return root.to(_FACTOR_DTYPE)

    def _like(self, **kwargs) -> FeatureSpacePredictionStrategy:
        """A strategy of the same kind for other training data (fantasies)."""
        return self.__class__(**kwargs)

    def _check_features_unchanged(self, posterior: WeightSpacePosterior) -> None:
        if feature_versions(self._kernel) != posterior.feature_versions:
            raise RuntimeError(
                "The random features changed (resample_features() or load_state_dict()) after this model's "
                "prediction caches were built; call model.train() and then model.eval() to rebuild them."
            )

    # ------------------------------------------------------------------ training-set cache
    @property
    @cached(name="weight_space_posterior")
    def weight_space_posterior(self) -> WeightSpacePosterior | None:
        """Float64 posterior of the weights, or ``None`` when the training covariance is not a feature root."""
        root = symmetric_root(self.train_prior_dist.lazy_covariance_matrix)
        noise = noise_diagonal(self.lik_train_train_covar)
        if root is None or noise is None:
            return None
        with torch.no_grad() if settings.detach_test_caches.on() else torch.enable_grad():
            phi = self._weight_features(root)
            noise = noise.to(_FACTOR_DTYPE)
            factor = CapacitanceFactor.from_features(phi, noise)
            residual = (self.train_labels - self.train_prior_dist.mean).to(phi.dtype)
            rhs = (phi.mH @ (residual / noise).unsqueeze(-1)).squeeze(-1)
            versions = feature_versions(self._kernel)
            posterior = WeightSpacePosterior(factor, rhs, _solve_vector(factor, rhs), versions)
        if posterior.mean.grad_fn is not None:
            # Drop the cache after a backward pass through it, as GPyTorch does for its own caches.
            wrapper = functools.partial(clear_cache_hook, self)
            functools.update_wrapper(wrapper, clear_cache_hook)
            posterior.mean.grad_fn.register_hook(wrapper)
        return posterior

    def _fallback(self, reason: str) -> None:
        warnings.warn(
            f"gprf's feature-space prediction cannot be used ({reason}); falling back to GPyTorch's dense "
            "O(N^3) prediction strategy. Keep random-feature kernels alone or inside ScaleKernel / gprf "
            "feature sums, with a Gaussian likelihood.",
            DispatchFallbackWarning,
            stacklevel=3,
        )

    # ------------------------------------------------------------------ prediction
    def exact_prediction(
        self, test_mean: Tensor, test_test_covar: LinearOperator, test_train_covar: LinearOperator
    ) -> tuple[Tensor, LinearOperator]:
        posterior = self.weight_space_posterior
        test_root = symmetric_root(test_test_covar)
        if posterior is None or test_root is None:
            self._fallback("the covariances are not random-feature roots")
            return super().exact_prediction(test_mean, test_test_covar, test_train_covar)
        self._check_features_unchanged(posterior)

        dtype = test_root.dtype
        phi = self._weight_features(test_root)
        mean = (phi @ posterior.mean.unsqueeze(-1)).squeeze(-1).real.to(dtype) + test_mean
        if settings.skip_posterior_variances.on():
            return mean, ZeroLinearOperator(*test_test_covar.shape, dtype=dtype, device=mean.device)
        # phi C^-1 phi^H = B^H B with B = G^-1 phi^H; Re(B^H B) has the real root [Re B^H, Im B^H].
        covar_root = posterior.factor.solve_root(phi.mH).mH
        if covar_root.is_complex():
            covar_root = torch.cat([covar_root.real, covar_root.imag], dim=-1)
        covar_root = covar_root.to(dtype)
        num_test, rank = covar_root.shape[-2:]
        if num_test <= rank:
            # A full-rank M x M matrix keeps sampling with M base samples (BoTorch) working.
            return mean, DenseLinearOperator(covar_root @ covar_root.mT)
        return mean, LowRankRootLinearOperator(covar_root)

    # ------------------------------------------------------------------ fantasies
    def get_fantasy_strategy(self, inputs, targets, full_inputs, full_targets, full_output, **kwargs):
        posterior = self.weight_space_posterior
        if posterior is None or isinstance(full_output, MultitaskMultivariateNormal):
            self._fallback("fantasies need a single-output model with a random-feature root")
            return super().get_fantasy_strategy(inputs, targets, full_inputs, full_targets, full_output, **kwargs)
        self._check_features_unchanged(posterior)

        num_train = self.num_train
        batch_shape = full_inputs[0].shape[:-2]
        full_mean = full_output.mean.view(*batch_shape, -1)
        full_covar = full_output.lazy_covariance_matrix
        fant_mean = full_mean[..., num_train:]
        fant_covar = full_covar[..., num_train:, num_train:]
        fant_likelihood = self.likelihood.get_fantasy_likelihood(**kwargs)
        observed = fant_likelihood(self.train_prior_dist.__class__(fant_mean, fant_covar), inputs, **kwargs)
        fant_root = symmetric_root(fant_covar)
        fant_noise = noise_diagonal(observed.lazy_covariance_matrix)
        if fant_root is None or fant_noise is None:
            self._fallback("the fantasy covariances are not random-feature roots")
            return super().get_fantasy_strategy(inputs, targets, full_inputs, full_targets, full_output, **kwargs)

        with torch.no_grad() if settings.detach_test_caches.on() else torch.enable_grad():
            fant_phi = self._weight_features(fant_root)
            fant_noise = fant_noise.to(_FACTOR_DTYPE)
            residual = (targets - fant_mean).to(fant_phi.dtype)
            rhs = posterior.rhs + (fant_phi.mH @ (residual / fant_noise).unsqueeze(-1)).squeeze(-1)
            factor = posterior.factor.update((fant_phi / fant_noise.sqrt().unsqueeze(-1)).mH)
            new_posterior = WeightSpacePosterior(factor, rhs, _solve_vector(factor, rhs), posterior.feature_versions)

        if full_inputs[0].dim() <= full_targets.dim():
            # Fantasies at shared inputs: repeat the inputs over the leading fantasy dimension.
            fant_batch_shape = full_targets.shape[:1]
            repeat_shape = fant_batch_shape + torch.Size([1] * len(full_mean.shape[:-1]))
            full_inputs = [fi.expand(fant_batch_shape + fi.shape) for fi in full_inputs]
            full_mean = full_mean.expand(fant_batch_shape + full_mean.shape)
            full_covar = BatchRepeatLinearOperator(full_covar, repeat_shape)

        fant_strategy = self._like(
            train_inputs=full_inputs,
            train_prior_dist=self.train_prior_dist.__class__(full_mean, full_covar),
            train_labels=full_targets,
            likelihood=fant_likelihood,
        )
        add_to_cache(fant_strategy, "weight_space_posterior", new_posterior)
        return fant_strategy


class ComplexFeaturePredictionStrategy(FeatureSpacePredictionStrategy):
    r"""The real part of the complex-feature GP posterior (paper 000, App. D.2–D.3, eqs. 84–90).

    A complex feature map :math:`\Phi` defines the Hermitian kernel :math:`\hat k = \Phi\Phi^H` and a proper
    complex GP. Conditioning it on real data with Gaussian noise :math:`\Sigma` and keeping real parts gives

    .. math::
        \mu(x_*) = \mathrm{Re}\big(\phi_*\,C^{-1}\Phi^H\Sigma^{-1}(y - m)\big) + m(x_*), \qquad
        \mathrm{cov}(x_*, x_*') = \mathrm{Re}\big(\phi_*\,C^{-1}\phi_*'^H\big), \qquad
        C = I + \Phi^H\Sigma^{-1}\Phi,

    with the ScaleKernel amplitude folded into :math:`\Phi`. The Hermitian :math:`F\times F` capacitance is
    formed and factored in complex128 (linear_operator has no complex support, so the complex algebra stays
    here and GPyTorch receives real tensors and real low-rank roots :math:`[\mathrm{Re}\,B^H, \mathrm{Im}\,B^H]`,
    :math:`B = L^{-1}\phi_*^H`). :math:`\Phi` is read back from the kernel's real root
    :math:`[\mathrm{Re}\,\Phi, \mathrm{Im}\,\Phi]`. The marginal likelihood (training) uses the real-part kernel.
    Costs: forming :math:`C` takes about 4 real :math:`NF^2` products against :math:`4NF^2`-equivalent for real
    features with :math:`2F` columns, and its Cholesky 4× the real :math:`F\times F` one against 8× for
    :math:`2F` real features (paper 000, §D.3).
    """

    def __init__(self, train_inputs, train_prior_dist, train_labels, likelihood, root=None, inv_root=None, *, num_complex_features: int):
        self.num_complex_features = num_complex_features
        super().__init__(train_inputs, train_prior_dist, train_labels, likelihood, root=root, inv_root=inv_root)

    def _weight_features(self, root: Tensor) -> Tensor:
        f = self.num_complex_features
        if root.size(-1) != 2 * f:
            raise ValueError(
                f"posterior='complex' expects the real root [Re Phi, Im Phi] with {2 * f} columns, got {root.size(-1)}."
            )
        root = root.to(_FACTOR_DTYPE)
        return torch.complex(root[..., :f], root[..., f:])

    def _like(self, **kwargs) -> ComplexFeaturePredictionStrategy:
        return self.__class__(**kwargs, num_complex_features=self.num_complex_features)

    def _fallback(self, reason: str) -> None:
        # The fallback would silently answer with the real-part-kernel posterior instead: refuse.
        raise ValueError(
            f"posterior='complex' needs a random-feature kernel (alone or in ScaleKernel) and a Gaussian "
            f"likelihood with diagonal noise ({reason}); use posterior='real_kernel' otherwise."
        )
