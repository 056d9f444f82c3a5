r"""Kernels given by a real feature root, :math:`K(X_1, X_2) = R(X_1)R(X_2)^\top`: the base class, the sum that keeps
one root (beside the base, as GPyTorch keeps ``AdditiveKernel`` beside ``Kernel``: ``+`` builds it), and the helpers
of the protocol."""

from __future__ import annotations

import itertools
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from gpytorch.kernels import AdditiveKernel, Kernel, ProductKernel, ScaleKernel
from linear_operator.operators import MatmulLinearOperator
from torch import Tensor

from gprf.exceptions import LowRankStructureWarning
from gprf.features.versions import feature_versions, mark_written
from gprf.kernels.exact_expression import exact_expression
from gprf.kernels.kernel_origin import KernelOrigin
from gprf.linalg import FeatureRootLinearOperator, LazyFeatures, covariance_root
from gprf.linalg.deferred_root_operator import DeferredRootLinearOperator
from gprf.linalg.root_algebra import same_tensor as same_inputs
from gprf.prediction import FeatureSpacePredictionStrategy
from gprf.settings import feature_chunk_size
from gprf.sizing import REFIT_MONITOR


def unwrap_scale_kernel(kernel: Kernel) -> Kernel:
    """The kernel inside any ``ScaleKernel`` wrappers."""
    while isinstance(kernel, ScaleKernel):
        kernel = kernel.base_kernel
    return kernel


def is_feature_kernel(kernel: object) -> bool:
    """Whether ``kernel`` is a gprf :class:`FeatureKernel`, alone or inside ``ScaleKernel`` wrappers."""
    return isinstance(kernel, Kernel) and isinstance(unwrap_scale_kernel(kernel), FeatureKernel)


class VisibleWrites:
    """Mixin of gprf's GPyTorch modules: values set through GPyTorch's ``initialize`` (every property setter, e.g.
    ``kernel.lengthscale = 0.5``) reach the version counters (:func:`~gprf.features.versions.mark_written`), so caches
    built on the old values notice (:func:`~gprf.features.versions.state_versions`)."""

    def initialize(self, **kwargs):
        result = super().initialize(**kwargs)
        mark_written(self, kwargs)
        return result


class FeatureKernel(VisibleWrites, Kernel, ABC):
    r"""A GPyTorch kernel :math:`k(x, y) = r(x)^\top r(y)` given by a real feature root :math:`r(x) \in \mathbb R^F`.

    Subclasses implement :meth:`features` and :attr:`root_dim` (:math:`F`, the number of columns of the root).
    Evaluations never form an :math:`N\times N` matrix: ``kernel(X)`` is a
    :class:`~gprf.linalg.FeatureRootLinearOperator` (the hand-off read by the marginal likelihood, the
    prediction strategies, streaming and BoTorch; its sum with a Gaussian likelihood's noise evaluates the
    marginal likelihood at :math:`O(NF^2)`), ``kernel(X1, X2)`` a ``MatmulLinearOperator``, and prediction uses
    :class:`~gprf.prediction.FeatureSpacePredictionStrategy`.

    An abstract class (GPyTorch's ``Kernel`` is not): a subclass missing an abstract method cannot be built.

    Sums of feature kernels are built with ``+`` between feature kernels (or :class:`~gprf.kernels.FeatureSumKernel`),
    which concatenates roots, and products with ``*`` (or :class:`~gprf.kernels.FeatureProductKernel`): the canonical
    spellings, predicted by gprf's strategy. GPyTorch's ``AdditiveKernel`` and ``ProductKernel`` of feature kernels
    (``ScaleKernel(k1) + ScaleKernel(k2)``, ``ScaleKernel(k1) * k2``) evaluate to the same roots
    (:mod:`gprf.linalg.root_algebra`, :mod:`gprf.kernels.root_products`), but GPyTorch predicts them with its own
    strategy (see the pitfalls in the documentation).
    """

    @abstractmethod
    def features(self, x: Tensor) -> Tensor:
        """Real feature root ``(..., n, F)`` of *raw* inputs (any lengthscale is applied inside)."""

    @property
    @abstractmethod
    def root_dim(self) -> int:
        """Number of columns ``F`` of the real root returned by :meth:`features`."""

    def root_operator(self, x: Tensor, features: Tensor | LazyFeatures) -> FeatureRootLinearOperator:
        """The covariance :math:`K(x, x)` with root ``features`` of raw inputs ``x`` (formed, or a
        :class:`~gprf.linalg.LazyFeatures`) as the hand-off, with its origin (this kernel's :meth:`features` of
        ``x``), which GPyTorch's ``ProductKernel`` of two random roots reads (:mod:`gprf.kernels.root_products`)."""
        return FeatureRootLinearOperator(features, origin=KernelOrigin(self, x), versions=feature_versions(self))

    def forward(
        self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params
    ) -> Tensor | FeatureRootLinearOperator | MatmulLinearOperator:
        if last_dim_is_batch:
            raise NotImplementedError(
                f"{type(self).__name__} does not support last_dim_is_batch (deprecated in GPyTorch); "
                "build one kernel per input dimension instead."
            )
        same = same_inputs(x1, x2)
        if same and not diag:
            if self.training and torch.is_grad_enabled():  # a training evaluation, e.g. a marginal likelihood's
                REFIT_MONITOR.note_fit(self, x1.size(-2), self.root_dim, x1.size(-1))
            chunk_size = feature_chunk_size.rows(x1.size(-2), self.root_dim)
            if chunk_size is not None:  # large N F: the marginal likelihood sums over row chunks, never forming R
                return self.root_operator(x1, self.lazy_features(x1, chunk_size))
        if not same and not diag:
            return MatmulLinearOperator(self.deferred_root(x1), self.deferred_root(x2, transposed=True))
        r1 = self.features(x1)
        if same:
            return (r1 * r1).sum(-1) if diag else self.root_operator(x1, r1)
        return (r1 * self.features(x2)).sum(-1)

    def deferred_root(self, x: Tensor, transposed: bool = False) -> DeferredRootLinearOperator:
        """:math:`R` (or :math:`R^\top`) of raw inputs ``x``, featurised only when read: the factors of cross
        covariances, whose test-train block GPyTorch's prediction evaluates for every call and gprf's prediction never
        reads (it takes the test rows' features from the test-test block)."""
        batch_shape, num_features = self._root_shape(x)
        params = tuple(param for param in self.parameters() if param.requires_grad)
        return DeferredRootLinearOperator(
            x,
            *params,
            feature_fn=self.features,
            batch_shape=batch_shape,
            num_features=num_features,
            transposed=transposed,
        )

    def _root_shape(self, x: Tensor) -> tuple[torch.Size, int]:
        """The batch shape and :math:`F` of the root of ``x``: from one featurised row, kept for the next call with
        the same shapes (the root's shape is a function of the shapes of the inputs, parameters and buffers alone;
        one entry, so the memory does not grow)."""
        key = (
            x.shape[:-2],
            x.shape[-1],
            x.dtype,
            x.device,
            self.root_dim,
            tuple(tensor.shape for tensor in itertools.chain(self.parameters(), self.buffers())),
        )
        known = self.__dict__.get("_known_root_shape")
        if known is None or known[0] != key:
            with torch.no_grad():
                first = self.features(x[..., :1, :])
            known = self.__dict__["_known_root_shape"] = (key, (first.shape[:-2], first.size(-1)))
        return known[1]

    def lazy_features(self, x: Tensor, chunk_size: int) -> LazyFeatures:
        """The root of raw inputs ``x`` not formed: :meth:`features` of row chunks of ``chunk_size``, differentiable
        in every parameter of this kernel (the only tensors requiring gradients that :meth:`features` may use)."""
        params = tuple(param for param in self.parameters() if param.requires_grad)
        return LazyFeatures(x, self.features, chunk_size, params)

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        return FeatureSpacePredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)

    def part_draws_nest(self) -> bool:
        """Whether each feature draw inside this kernel may be cut to a prefix on its own while the others keep theirs
        (:meth:`~gprf.kernels.FeatureMapOwner.features_resized`), as :func:`gprf.fit_mll` does to tune with few
        features; where this answers ``False``, every draw inside the kernel, its own included, keeps its full size.

        ``True`` here: a sum concatenates its parts' roots, and a kernel of one map is its own part. An extension
        point: a kernel that combines its parts' columns with one another, so that a prefix of one part would no longer
        match the others, returns ``False`` (:class:`~gprf.kernels.FeatureProductKernel` does).
        """
        return True

    def __add__(self, other: Kernel) -> Kernel:
        if is_feature_kernel(other):
            return FeatureSumKernel(self, other)
        if isinstance(other, (AdditiveKernel, ProductKernel)):
            # GPyTorch's sum or product: its covariance keeps a feature root when its parts have one (and warns when
            # it cannot), which shows when it is evaluated.
            return super().__add__(other)
        warnings.warn(
            f"Adding {type(other).__name__} to a random-feature kernel gives a GPyTorch AdditiveKernel whose "
            "covariance is dense (O(N^3) training); add random-feature kernels only to each other.",
            LowRankStructureWarning,
            stacklevel=2,
        )
        return super().__add__(other)

    def __mul__(self, other: Kernel) -> Kernel:
        """The product as one feature root (:class:`~gprf.kernels.FeatureProductKernel`): with another feature
        kernel, or with a task kernel (``IndexKernel``, BoTorch's ``PositiveIndexKernel``) through its exact root
        (:class:`~gprf.kernels.IndexRootKernel`) — what BoTorch's ``MultiTaskGP`` builds from a gprf
        ``covar_module``. The budget is :func:`~gprf.kernels.feature_product_kernel.default_product_budget`."""
        return _multiply(self, other)


# ``k1 * k2`` is built by gprf.kernels.feature_product_kernel, which builds on this module: it registers its builder
# here when imported (gprf.kernels imports it), so that this module never imports it back.
_multiply: Callable[[FeatureKernel, Kernel], Kernel]


def register_product(multiply: Callable[[FeatureKernel, Kernel], Kernel]) -> None:
    """Make ``multiply(k1, k2)`` the product ``k1 * k2`` of a feature kernel ``k1`` with any kernel ``k2``."""
    global _multiply
    _multiply = multiply


class FeatureKernelOfParts(FeatureKernel):
    """A feature kernel made of other kernels (``self.kernels``: sums and products), which tell its dtype and device.

    GPyTorch reads dtype and device from a kernel's own parameters; parts without a lengthscale keep theirs in their
    feature draws, so the parts (and any parameter of the kernel itself) are asked instead.
    """

    kernels: torch.nn.ModuleList

    @classmethod
    def check_parts(cls, kernels: tuple[Kernel, ...], what: str, hint: str = "") -> None:
        """Raise unless ``kernels`` are at least two gprf feature kernels (optionally in ``ScaleKernel``); ``what``
        says what the class does with which kernels, ``hint`` how to get there from another kernel."""
        if len(kernels) < 2:
            raise ValueError(f"{cls.__name__} needs at least two kernels.")
        for kernel in kernels:
            if not is_feature_kernel(kernel):
                raise TypeError(
                    f"{cls.__name__} only {what} (optionally in ScaleKernel), got {type(kernel).__name__}{hint}."
                )

    @property
    def dtype(self) -> torch.dtype:
        dtypes = {kernel.dtype for kernel in self.kernels} | {param.dtype for param in self.parameters(recurse=False)}
        if len(dtypes) > 1:
            # GPyTorch's wording (its kernel test case matches it).
            raise RuntimeError(f"The kernel's parameters have multiple dtypes (parts included): {dtypes}.")
        return dtypes.pop()

    @property
    def device(self) -> torch.device | None:
        devices = {kernel.device for kernel in self.kernels} - {None}
        devices |= {param.device for param in self.parameters(recurse=False)}
        if len(devices) > 1:
            raise RuntimeError(f"The parts of {type(self).__name__} are on different devices: {devices}.")
        return devices.pop() if devices else None


class FeatureSumKernel(FeatureKernelOfParts):
    r"""Sum :math:`k = \sum_j k_j` of feature kernels with root :math:`[r_1(x), \ldots, r_J(x)]`.

    The concatenated root satisfies :math:`[r_1, \ldots, r_J][r_1, \ldots, r_J]^\top = \sum_j r_j r_j^\top`,
    so the sum keeps the :math:`O(NF^2)` training and feature-space prediction with
    :math:`F = \sum_j F_j`. Summands may be feature kernels or ``ScaleKernel``\ s around them (each with
    its own amplitude and ``active_dims``). ``k1 + k2`` between feature kernels builds this kernel.

    Example:
        >>> short = ScaleKernel(RandomFourierKernel(256, num_dims=3))
        >>> long = ScaleKernel(RandomFourierKernel(256, num_dims=3, kernel="matern52"))
        >>> covar_module = FeatureSumKernel(short, long)
    """

    def __init__(self, *kernels: Kernel, **kwargs) -> None:
        self.check_parts(kernels, "adds random-feature kernels")
        super().__init__(**kwargs)
        flat: list[Kernel] = []
        for kernel in kernels:
            flat.extend(kernel.kernels if isinstance(kernel, FeatureSumKernel) else [kernel])
        self.kernels = torch.nn.ModuleList(flat)

    @property
    def root_dim(self) -> int:
        return sum(unwrap_scale_kernel(kernel).root_dim for kernel in self.kernels)

    def features(self, x: Tensor) -> Tensor:
        # Each summand through GPyTorch (its active_dims) and the one decoder (its amplitude): the concatenation
        # needs the scaled roots themselves.
        roots = [covariance_root(kernel, x).scaled_features() for kernel in self.kernels]
        batch_shape = torch.broadcast_shapes(*(root.shape[:-2] for root in roots))
        return torch.cat([root.expand(*batch_shape, *root.shape[-2:]) for root in roots], dim=-1)

    def exact(self) -> Kernel:
        """GPyTorch's ``AdditiveKernel`` of the summands' exact expressions, sharing every hyperparameter."""
        return AdditiveKernel(*(exact_expression(kernel) for kernel in self.kernels))

    # GPyTorch's generic versions walk nested sub-kernels by dotted name; rebuild the list instead.
    def __getitem__(self, index) -> Kernel:
        return FeatureSumKernel(*(kernel[index] for kernel in self.kernels))

    def expand_batch(self, *sizes) -> Kernel:
        return FeatureSumKernel(*(kernel.expand_batch(*sizes) for kernel in self.kernels))
