r"""Products :math:`k = \prod_i k_i` of feature kernels as one real root: the exact row-wise Kronecker product, the
joint-frequency product of random Fourier features, or an unbiased random pairing of the factors' columns."""

from __future__ import annotations

import math

import torch
from gpytorch.kernels import IndexKernel, Kernel, ProductKernel, ScaleKernel
from torch import Tensor

from gprf._checks import check_choice
from gprf.features import RandomFourierFeatures
from gprf.features.unseeded import unseeded_generator
from gprf.features.versions import feature_versions
from gprf.kernels.exact_expression import exact_expression
from gprf.kernels.feature_kernel import (
    FeatureKernel,
    FeatureKernelOfParts,
    is_feature_kernel,
    register_product,
    unwrap_scale_kernel,
)
from gprf.kernels.independent_factors import independent_factors
from gprf.kernels.index_root_kernel import IndexRootKernel
from gprf.kernels.random_feature_kernel import RandomFeatureKernel
from gprf.linalg import covariance_root
from gprf.linalg.root_algebra import kronecker_rows

PRODUCT_METHODS = ("auto", "kronecker", "joint", "permutation")


def is_random(kernel: Kernel) -> bool:
    """Whether the root of ``kernel`` depends on random draws (an exact root, e.g. a task factor, does not)."""
    return len(feature_versions(kernel)) > 0


def default_product_budget(kernels: tuple[Kernel, ...]) -> int | None:
    r"""The number of columns ``k1 * k2`` gives a product: the largest random factor's root times the roots of the
    exact factors (so exact factors, e.g. task factors, always enter by the exact Kronecker product), or ``None``
    (Kronecker) when at most one factor is random."""
    random_dims = [unwrap_scale_kernel(kernel).root_dim for kernel in kernels if is_random(kernel)]
    if len(random_dims) <= 1:
        return None
    exact_dims = [unwrap_scale_kernel(kernel).root_dim for kernel in kernels if not is_random(kernel)]
    return max(random_dims) * math.prod(exact_dims)


def fourier_frequencies(kernel: Kernel) -> int | None:
    """The number of frequencies of a random Fourier feature factor (root ``[cos, sin]/sqrt(m)``), else ``None``."""
    base = unwrap_scale_kernel(kernel)
    if isinstance(base, RandomFeatureKernel) and isinstance(base.feature_map, RandomFourierFeatures):
        return base.feature_map.num_frequencies
    return None


class FeatureProductKernel(FeatureKernelOfParts):
    r"""Product :math:`k(x, y) = \prod_{i=1}^K k_i(x, y)` of feature kernels with one real root.

    Factors are gprf feature kernels, optionally inside ``ScaleKernel``, each with its own ``active_dims`` (e.g.
    an RBF on the continuous inputs times a Matérn on others, or a data kernel times a task factor
    :class:`~gprf.kernels.IndexRootKernel`). Each factor's root :math:`r_i` (with amplitude) is combined by
    ``method``:

    * ``"kronecker"``: the row-wise Kronecker (Khatri–Rao) product :math:`\rho = r_1 \otimes \cdots \otimes r_K`
      with :math:`\prod_i F_i` columns. Exactly :math:`\prod_i \hat k_i`; unbiased for :math:`\prod_i k_i` because
      the factors are independent draws, with variance (two factors, :math:`v_i = \mathrm{Var}\,\hat k_i`)
      :math:`(v_1 + k_1^2)(v_2 + k_2^2) - k_1^2k_2^2`. Exact for exact factors (task factors).
    * ``"joint"`` (random Fourier feature factors): per frequency :math:`j`,
      :math:`e^{i w_{1j}^\top x_1}e^{i w_{2j}^\top x_2} = e^{i(a_j + b_j)}`, i.e.
      :math:`\rho = m^{-1/2}[\cos(a + b), \sin(a + b)]` with :math:`\cos(a+b) = c_1c_2 - s_1s_2`,
      :math:`\sin(a+b) = s_1c_2 + c_1s_2` from the factors' first :math:`m = F/2` frequencies. The joint
      frequency :math:`(w_{1j}, w_{2j})` is a draw from the product's spectral measure, so this *is* random
      Fourier features of the product kernel (Rahimi & Recht 2007): unbiased, variance
      :math:`\frac1m[(1 + k(2\Delta))/2 - k(\Delta)^2]` for iid frequencies, zero on the diagonal.
    * ``"permutation"`` (any roots): :math:`\rho_j = \sqrt{\prod_i F_i / F}\,\prod_i r_{i,\pi_i(j)}` with
      independent random index draws :math:`\pi_i` (random permutations of each factor's columns, repeated when
      :math:`F > F_i`), a coordinate-sampling sketch of the Kronecker product in the spirit of TensorSketch
      (Pham & Pagh 2013) and TensorSRHT (Ahle et al. 2020): unbiased conditionally on the factors since every
      :math:`\pi_i(j)` is uniform. For two factors with :math:`F = F_1 = F_2`, with
      :math:`u_a = r_{1a}(x)r_{1a}(y)`, :math:`v_b = r_{2b}(x)r_{2b}(y)`, Hoeffding's permutation variance gives
      :math:`\mathrm{Var} = \frac{F^2}{F-1}E[S_u]E[S_v] + \mathrm{Var}(\hat k_1\hat k_2)`,
      :math:`S_u = \sum_a (u_a - \bar u)^2` (closed form for iid Fourier factors in :meth:`variance`).
    * ``"auto"`` (default): ``"kronecker"`` when ``num_features`` is ``None`` or :math:`\prod_i F_i \le`
      ``num_features``; else ``"joint"`` when every factor is a random Fourier feature kernel with at least
      ``num_features / 2`` frequencies (measured lower error per feature than ``"permutation"``; see
      ``python -m benchmarks --what composite``), else ``"permutation"``.

    ``k1 * k2`` between feature kernels builds this kernel, with ``num_features`` the largest random factor's
    root dimension times the exact factors'
    (:func:`~gprf.kernels.feature_product_kernel.default_product_budget`). GPyTorch's ``ScaleKernel(k1) * k2``
    goes through GPyTorch's ``Kernel.__mul__`` (a ``ProductKernel``), whose covariance is this kernel's root of the
    factors (:mod:`gprf.kernels.root_products`) but whose predictions are GPyTorch's: ``ScaleKernel(k1 * k2)`` or
    ``FeatureProductKernel(ScaleKernel(k1), k2)`` is the canonical spelling.

    The estimate is unbiased only for independent factors: a factor whose draws repeat an earlier factor's (``k * k``,
    ``FeatureProductKernel(k, k)``, two factors built with one seed, a deep copy) is replaced by a copy that shares
    its hyperparameters (the same ``Parameter`` objects) and draws its own features
    (:func:`~gprf.kernels.independent_factors.independent_factors`); ``kernels`` then holds that copy, not the
    object passed in.

    The pairing draws are a buffer (``pairing``, one draw shared by the batch; the factors draw per batch member)
    made at construction from ``seed``; :meth:`resample_features` redraws them with the factors' features.

    References:
        * A. Rahimi, B. Recht. *Random Features for Large-Scale Kernel Machines.* NeurIPS, 2007.
        * N. Pham, R. Pagh. *Fast and Scalable Polynomial Kernels via Explicit Feature Maps.* KDD, 2013.
        * T. D. Ahle, M. Kapralov, J. B. T. Knudsen, R. Pagh, A. Velingker, D. P. Woodruff, A. Zandieh. *Oblivious
          Sketching of High-Degree Polynomial Kernels.* SODA, 2020.

    Args:
        kernels: Two or more gprf feature kernels (optionally in ``ScaleKernel``).
        num_features: Columns of the root for the sketched methods (``None``: the Kronecker product).
        method: ``"auto"``, ``"kronecker"``, ``"joint"`` or ``"permutation"``.
        seed: Seed of the pairing draws (``None``: from torch's global generator state, not advanced).
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``active_dims`` of the product, ...).

    Example:
        >>> rbf = RandomFourierKernel(1024, num_dims=3, active_dims=[0, 1, 2], seed=0)
        >>> matern = RandomFourierKernel(1024, num_dims=3, kernel="matern52", active_dims=[3, 4, 5], seed=1)
        >>> covar_module = ScaleKernel(rbf * matern)  # 1024 joint-frequency features
    """

    def __init__(
        self,
        *kernels: Kernel,
        num_features: int | None = None,
        method: str = "auto",
        seed: int | None = None,
        **kwargs,
    ) -> None:
        self.check_parts(
            kernels,
            "multiplies gprf feature kernels",
            "; approximate it first (gprf.random_features) or wrap task kernels (IndexKernel) in IndexRootKernel",
        )
        kernels = independent_factors(kernels)
        try:
            batch_shape = torch.broadcast_shapes(*(kernel.batch_shape for kernel in kernels))
        except RuntimeError as error:
            shapes = [tuple(kernel.batch_shape) for kernel in kernels]
            raise ValueError(
                f"The factors' batch_shapes {shapes} do not broadcast; build every factor with the same batch_shape."
            ) from error
        if "batch_shape" in kwargs and torch.Size(kwargs["batch_shape"]) != batch_shape:
            raise ValueError(
                f"batch_shape={tuple(kwargs['batch_shape'])} differs from the factors' {tuple(batch_shape)}."
            )
        # The factors carry the batch shape (GPyTorch's getter broadcasts them): a copy of the product stays whole
        # when its factors' batch is changed one module at a time (BoTorch's subset_output).
        kwargs.pop("batch_shape", None)
        method = check_choice(method, "method", PRODUCT_METHODS)
        if num_features is not None:
            if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < len(kernels):
                raise ValueError(
                    f"num_features={num_features!r} must be an int of at least the number of factors ({len(kernels)}) "
                    "(a product needs a column per factor); raise num_features or pass None for the Kronecker product."
                )
        super().__init__(**kwargs)
        self.kernels = torch.nn.ModuleList(kernels)
        self.num_features = num_features
        #: How the factors' roots are combined, ``"kronecker"``, ``"joint"`` or ``"permutation"`` (``"auto"``
        #: resolved at construction).
        self.method = self._resolve_method(method, num_features)
        self.seed = seed
        num_pairings = len(kernels) if self.method == "permutation" else 0
        self.register_buffer("pairing", torch.empty(num_pairings, num_features or 0, dtype=torch.long))
        self._draw_pairing()

    # ------------------------------------------------------------------ construction
    @property
    def factor_dims(self) -> list[int]:
        """Columns :math:`F_i` of each factor's root."""
        return [unwrap_scale_kernel(kernel).root_dim for kernel in self.kernels]

    def _resolve_method(self, method: str, num_features: int | None) -> str:
        kronecker_dim = math.prod(self.factor_dims)
        if method == "auto":
            if num_features is None or kronecker_dim <= num_features:
                return "kronecker"
            return "joint" if self._joint_refusal(num_features) is None else "permutation"
        if method == "kronecker":
            if num_features is not None and kronecker_dim > num_features:
                raise ValueError(
                    f"method='kronecker' gives prod F_i = {kronecker_dim} columns > num_features={num_features}; "
                    "pass num_features=None (or larger), or method='joint'/'permutation' for a sketched product."
                )
            return method
        if num_features is None:
            raise ValueError(f"method={method!r} needs num_features (the number of columns of the product's root).")
        if method == "joint":
            refusal = self._joint_refusal(num_features)
            if refusal is not None:
                raise ValueError(f"method='joint' {refusal}; use method='permutation' for arbitrary factors.")
        return method

    def _joint_refusal(self, num_features: int) -> str | None:
        """Why the joint-frequency product cannot give ``num_features`` columns (``None``: it can)."""
        if num_features % 2:
            return f"needs an even num_features (cos and sin per frequency), got {num_features}"
        for kernel in self.kernels:
            frequencies = fourier_frequencies(kernel)
            if frequencies is None:
                return f"needs random Fourier feature factors (RandomFourierKernel), got {type(kernel).__name__}"
            if frequencies < num_features // 2:
                return (
                    f"needs at least num_features/2 = {num_features // 2} frequencies per factor, a factor has "
                    f"{frequencies}; build the factors with num_features >= {num_features}"
                )
        return None

    def _generator(self, generator: torch.Generator | None) -> torch.Generator:
        if generator is not None:
            return generator
        if self.seed is not None:
            return torch.Generator().manual_seed(self.seed)
        return unseeded_generator()

    @torch.no_grad()
    def _draw_pairing(self, generator: torch.Generator | None = None) -> None:
        if self.pairing.numel() == 0:
            return
        generator = self._generator(generator)
        rows = []
        for dim in self.factor_dims:
            # Concatenated permutations: every index uniform, each column used at most once per block of F_i.
            blocks = [torch.randperm(dim, generator=generator) for _ in range(-(-self.num_features // dim))]
            rows.append(torch.cat(blocks)[: self.num_features])
        self.pairing.copy_(torch.stack(rows))

    def resample_features(self, generator: torch.Generator | None = None) -> None:
        """Redraw every random factor's features and the pairing draws, in place."""
        for kernel in self.kernels:
            base = unwrap_scale_kernel(kernel)
            if hasattr(base, "resample_features"):
                base.resample_features(generator)
        self._draw_pairing(generator)

    # ------------------------------------------------------------------ features
    @property
    def root_dim(self) -> int:
        return math.prod(self.factor_dims) if self.method == "kronecker" else self.num_features

    def features(self, x: Tensor) -> Tensor:
        # Each factor through GPyTorch (its active_dims) and the one decoder (its amplitude), as in FeatureSumKernel.
        return self.combine([covariance_root(kernel, x).scaled_features() for kernel in self.kernels])

    def combine(self, roots: list[Tensor]) -> Tensor:
        r"""The product's root from its factors' roots ``roots`` (one per factor, of the same rows, :math:`F_i`
        columns each) by :attr:`method`. Linear in each root, so roots without their amplitudes give the product's
        root without the product of the amplitudes."""
        if self.method == "kronecker":
            product = roots[0]
            for root in roots[1:]:
                product = kronecker_rows(product, root)
            return product
        if self.method == "joint":
            return self._joint(roots)
        scale = math.sqrt(math.prod(self.factor_dims) / self.num_features)
        product = roots[0].index_select(-1, self.pairing[0]) * scale
        for root, pairing in zip(roots[1:], self.pairing[1:], strict=True):
            product = product * root.index_select(-1, pairing)
        return product

    def _joint(self, roots: list[Tensor]) -> Tensor:
        m = self.num_features // 2
        cos = sin = None
        for root in roots:
            frequencies = root.size(-1) // 2
            # The factor's own 1/sqrt(m_i) normalisation is undone, so its columns are (amplitude times) cos, sin.
            scale = math.sqrt(frequencies)
            c, s = root[..., :m] * scale, root[..., frequencies : frequencies + m] * scale
            if cos is None:
                cos, sin = c, s
            else:
                cos, sin = cos * c - sin * s, sin * c + cos * s
        return torch.cat([cos, sin], dim=-1) / math.sqrt(m)

    # ------------------------------------------------------------------ closed forms
    def variance(self, x1: Tensor, x2: Tensor) -> Tensor:
        r"""Closed-form variance of :math:`\hat k(x1_i, x2_i)` row by row (raw inputs, hyperparameters as they are).

        ``"kronecker"``: :math:`\prod_i (v_i + k_i^2) - \prod_i k_i^2` (any factors with a closed-form variance;
        exact factors have :math:`v_i = 0`). ``"joint"``: :math:`\frac{1}{m}[(1 + k(2\Delta))/2 - k(\Delta)^2]\prod_i
        s_i^2` with :math:`k = \prod_i k_i` at unit amplitude, for iid-frequency factors. ``"permutation"``: two
        iid-frequency Fourier factors with :math:`F = F_1 = F_2`,
        :math:`\frac{F^2}{F-1}E[S_1]E[S_2] + (v_1 + k_1^2)(v_2 + k_2^2) - k_1^2k_2^2`, with
        :math:`E[S_i] = E\sum_a u_a^2 - (v_i + k_i^2)/F` and, per factor of amplitude :math:`s` and :math:`m`
        frequencies, :math:`E\sum_a u_a^2 = \frac{s^2}{2m}[1 + (k(2\Delta) + k(2(x + y)))/2]`.
        """
        return self.variance_of_selected(select_active(self, x1), select_active(self, x2))

    def variance_of_selected(self, x1: Tensor, x2: Tensor) -> Tensor:
        """:meth:`variance` of inputs with this kernel's own ``active_dims`` already applied (by a wrapping
        ``ScaleKernel``, which takes them over)."""
        moments = [factor_moments(kernel, x1, x2) for kernel in self.kernels]
        if self.method == "kronecker":
            second = math.prod(mean.square() + var for mean, var, _ in moments)
            return second - math.prod(mean.square() for mean, _, _ in moments)
        if self.method == "joint":
            return self._joint_variance(x1, x2)
        if len(self.kernels) != 2 or len(set(self.factor_dims + [self.num_features])) != 1:
            raise NotImplementedError(
                "The permutation product's closed-form variance is derived for two factors with F = F_1 = F_2; "
                "estimate it by resampling (resample_features)."
            )
        size = self.num_features
        spread = [
            fourier_square_sum(kernel, x1, x2) - (var + mean.square()) / size
            for kernel, (mean, var, _) in zip(self.kernels, moments, strict=True)
        ]
        (k1, v1, _), (k2, v2, _) = moments
        return (
            size**2 / (size - 1) * spread[0] * spread[1] + (v1 + k1.square()) * (v2 + k2.square()) - (k1 * k2).square()
        )

    def _joint_variance(self, x1: Tensor, x2: Tensor) -> Tensor:
        unit, doubled, amplitude = 1.0, 1.0, 1.0
        for kernel in self.kernels:
            outputscale, base, z1, z2 = scaled_pair(kernel, x1, x2)
            _require_iid_fourier(base)
            unit = unit * base.feature_map.expected_kernel(z1, z2)
            doubled = doubled * base.feature_map.expected_kernel(2 * z1, 2 * z2)
            amplitude = amplitude * outputscale
        m = self.num_features // 2
        return amplitude**2 * ((1 + doubled) / 2 - unit.square()) / m

    def part_draws_nest(self) -> bool:
        """``False``: the product pairs its factors' columns one by one (Kronecker, joint frequencies, or the pairing
        draws), so the factors keep their full draws."""
        return False

    # ------------------------------------------------------------------ GPyTorch plumbing
    def exact(self) -> Kernel:
        """GPyTorch's ``ProductKernel`` of the factors' exact expressions (:func:`~gprf.kernels.exact_expression`:
        ``ScaleKernel`` factors keep their outputscale), with this kernel's ``active_dims``."""
        exact = ProductKernel(*(exact_expression(kernel) for kernel in self.kernels))
        exact.active_dims = self.active_dims  # ProductKernel takes no active_dims argument; Kernel.__call__ reads it
        return exact

    def _rebuild(self, kernels) -> FeatureProductKernel:
        new = FeatureProductKernel(
            *kernels, num_features=self.num_features, method=self.method, seed=self.seed, active_dims=self.active_dims
        )
        new.pairing = self.pairing  # the same pairing draws, not a new draw
        return new

    # GPyTorch's generic versions walk nested sub-kernels by dotted name; rebuild the product instead.
    def __getitem__(self, index) -> Kernel:
        return self._rebuild(kernel[index] for kernel in self.kernels)

    def expand_batch(self, *sizes) -> Kernel:
        return self._rebuild(kernel.expand_batch(*sizes) for kernel in self.kernels)

    def extra_repr(self) -> str:
        return f"method={self.method!r}, num_features={self.num_features}, root_dim={self.root_dim}"


# ---------------------------------------------------------------------- moments of one factor
def select_active(kernel: Kernel, x: Tensor) -> Tensor:
    """The columns of ``x`` GPyTorch hands ``kernel`` (its ``active_dims``)."""
    return x if kernel.active_dims is None else x.index_select(-1, kernel.active_dims.to(x.device))


def scaled_pair(kernel: Kernel, x1: Tensor, x2: Tensor) -> tuple[Tensor | float, Kernel, Tensor, Tensor]:
    """The amplitude of ``kernel``'s ``ScaleKernel`` wrappers, its base kernel, and the inputs the base kernel's
    feature map sees: the outer kernel's ``active_dims`` applied (GPyTorch applies only the called kernel's;
    ``ScaleKernel`` takes over its base kernel's and calls the base's ``forward``), divided by the lengthscale."""
    x1, x2 = select_active(kernel, x1), select_active(kernel, x2)
    amplitude: Tensor | float = 1.0
    while isinstance(kernel, ScaleKernel):
        amplitude = amplitude * kernel.outputscale.unsqueeze(-1)
        kernel = kernel.base_kernel
    if hasattr(kernel, "scale_inputs"):
        x1, x2 = kernel.scale_inputs(x1), kernel.scale_inputs(x2)
    return amplitude, kernel, x1, x2


def factor_moments(kernel: Kernel, x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor, Kernel]:
    r"""Mean :math:`E\hat k` and variance of a factor's estimate row by row, and its base kernel: closed forms of the
    factor's feature map, a nested product's own, or zero variance for exact roots."""
    amplitude, base, z1, z2 = scaled_pair(kernel, x1, x2)
    if isinstance(base, FeatureProductKernel):
        mean = math.prod(factor_moments(factor, z1, z2)[0] for factor in base.kernels)
        return amplitude * mean, amplitude**2 * base.variance_of_selected(z1, z2), base
    if not is_random(base):  # an exact root: the estimate is the kernel itself (active_dims already applied)
        value = base.forward(z1, z2, diag=True)
        return amplitude * value, torch.zeros_like(value), base
    feature_map = getattr(base, "feature_map", None)
    if feature_map is None:
        raise NotImplementedError(f"No closed-form moments for the factor {type(base).__name__}.")
    mean = feature_map.expected_kernel(z1, z2)
    return amplitude * mean, amplitude**2 * feature_map.variance(z1, z2), base


def _require_iid_fourier(base: Kernel) -> None:
    feature_map = getattr(base, "feature_map", None)
    if not isinstance(feature_map, RandomFourierFeatures) or feature_map.sampler != "iid":
        raise NotImplementedError(
            f"This closed-form variance assumes iid random Fourier feature factors; {type(base).__name__} is not "
            "one (estimate the variance by resampling)."
        )


def fourier_square_sum(kernel: Kernel, x1: Tensor, x2: Tensor) -> Tensor:
    r""":math:`E\sum_a u_a^2` with :math:`u_a = r_a(x)r_a(y)` for an iid random Fourier factor:
    :math:`\frac{s^2}{2m}[1 + (k(2\Delta) + k(2(x + y)))/2]` (from :math:`\cos^2a\cos^2b + \sin^2a\sin^2b =
    (1 + \cos 2a\cos 2b)/2`)."""
    amplitude, base, z1, z2 = scaled_pair(kernel, x1, x2)
    _require_iid_fourier(base)
    feature_map = base.feature_map
    doubled = feature_map.expected_kernel(2 * z1, 2 * z2) + feature_map.expected_kernel(2 * z1, -2 * z2)
    return amplitude**2 * (1 + doubled / 2) / (2 * feature_map.num_frequencies)


def multiply(kernel: FeatureKernel, other: Kernel) -> Kernel:
    """``kernel * other`` for a feature kernel (:meth:`FeatureKernel.__mul__ <gprf.kernels.FeatureKernel.__mul__>`):
    a :class:`FeatureProductKernel` of budget :func:`default_product_budget`, a task ``IndexKernel`` entering through
    its exact root; other kernels are refused."""
    if isinstance(other, IndexKernel):
        other = IndexRootKernel(other)
    if not is_feature_kernel(other):
        raise TypeError(
            f"Multiplying a random-feature kernel by {type(other).__name__} is not supported: GPyTorch's "
            "ProductKernel multiplies the covariances elementwise, which destroys the low-rank feature root "
            "(dense N x N training). Multiply gprf feature kernels (k1 * k2, or FeatureProductKernel(k1, k2, "
            "num_features=F)) or a task IndexKernel; approximate the other factor first (gprf.random_features)."
        )
    return FeatureProductKernel(kernel, other, num_features=default_product_budget((kernel, other)))


register_product(multiply)
