r"""The training covariance :math:`K = s\,RR^\top + \Sigma` with its Gaussian log density in feature space."""

from __future__ import annotations

import warnings

import torch
from linear_operator.operators import (
    CatLinearOperator,
    ConstantDiagLinearOperator,
    DenseLinearOperator,
    DiagLinearOperator,
    LowRankRootAddedDiagLinearOperator,
)
from torch import Tensor

from gprf.exceptions import LowRankStructureWarning
from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.points_factor import factor_points
from gprf.linalg.route import choose_route
from gprf.linalg.weight_space_cg import cg_feature_space_terms
from gprf.settings import factor_dtype, weight_space_solver

#: Feature draws (their versions, unique per draw and process) whose dense covariance has been warned about.
_DENSE_WARNED_DRAWS: set[tuple[int, ...]] = set()


class FeatureRootAddedDiagLinearOperator(LowRankRootAddedDiagLinearOperator):
    r""":math:`K = s\,RR^\top + \Sigma` (a :class:`~gprf.linalg.FeatureRootLinearOperator` plus noise).

    With :math:`C = I + s\,R^\top\Sigma^{-1}R = LL^\top` (matrix determinant lemma and Woodbury identity):

    .. math::
        \log\det K = \log\det C + \sum_i \log\sigma_i^2, \qquad
        y^\top K^{-1}y = y^\top\Sigma^{-1}y - \lVert L^{-1}\sqrt s\,R^\top\Sigma^{-1}y\rVert^2 .

    :math:`C` comes from :func:`gprf.linalg.factor_capacitance` (Gram with a one-GEMM backward, its products and
    factor in :class:`gprf.settings.factor_dtype` unless a float32 model's own products are known to be
    accurate), so float32 models stay accurate at small noise;
    the whole step costs :math:`2NF^2 + O(F^3)` flops forward and backward. With fewer points than features
    (:math:`N < F`, common early in Bayesian optimization) :math:`K` itself is formed and factored instead,
    :math:`O(N^2F + N^3)`, which avoids the :math:`O(F^3)` factorisation and its backward
    (:func:`gprf.linalg.choose_route`; :class:`gprf.settings.covariance_route` forces either). Training rows with
    NaN or infinite values raise :class:`~gprf.exceptions.NonFiniteTrainingDataError`; a covariance of no training
    points raises ``ValueError`` (GPyTorch's marginal likelihood per point would be :math:`0/0`).

    GPyTorch's ``MultivariateNormal.log_prob`` only calls ``inv_quad_logdet`` while linear_operator's
    ``fast_computations.log_prob`` is on (GPyTorch's default; BoTorch switches it off on import). Otherwise it
    takes a dense :math:`N\times N` Cholesky of ``to_dense()``, which warns with
    :class:`~gprf.exceptions.LowRankStructureWarning` (once per feature draw, i.e. per model) when :math:`N > F`
    (for :math:`N \le F` that is the points route anyway); :class:`gprf.distributions.MultivariateNormal` keeps the
    structured density under either setting.
    """

    @property
    def feature_root(self) -> FeatureRoot:
        """The hand-off, with the noise variances."""
        return self._linear_op.feature_root.with_noise(self.noise_variances())

    def noise_variances(self) -> Tensor:
        """Noise variances ``(*batch, N)``, or ``(*batch, 1)`` for one variance per batch member (homoscedastic)."""
        if isinstance(self._diag_tensor, ConstantDiagLinearOperator):
            values = self._diag_tensor.diag_values
            while values.dim() > len(self.batch_shape) + 1 and values.size(0) == 1:  # e.g. (1, 1) for no batch
                values = values.squeeze(0)
            return values.expand(*self.batch_shape, 1)
        return self._diag_tensor.diagonal(dim1=-2, dim2=-1)

    def _size(self) -> torch.Size:
        # linear_operator's sum broadcasts its summands' shapes (torch.broadcast_shapes, in Python) at every call,
        # and a marginal likelihood asks for this shape a dozen times: at tens of points that was a tenth of its time.
        root, diagonal = self._linear_op.shape, self._diag_tensor.shape
        return root if root == diagonal else torch.broadcast_shapes(root, diagonal)

    def evaluate_kernel(self) -> FeatureRootAddedDiagLinearOperator:
        # Nothing in a feature root plus a diagonal is lazily evaluated; linear_operator's default rebuilds the
        # operator from its representation (twice per GPyTorch log density), which is all overhead.
        return self

    def _root_decomposition(self) -> CatLinearOperator:
        r"""The exact root :math:`[\sqrt s\,R,\ \Sigma^{1/2}]` ``(*batch, N, F + N)``, with :math:`O(NF)` products,
        where linear_operator would run Lanczos (matrices larger than ``max_cholesky_size``): the Krylov space of
        :math:`s\,RR^\top + \sigma^2 I` has dimension :math:`F + 1`, so Lanczos would return a root of rank
        :math:`F + 1` and samples without the noise outside that space."""
        root = self.feature_root
        noise = root.noise.expand(*self.batch_shape, self.size(-1))
        return CatLinearOperator(DenseLinearOperator(root.scaled_features()), DiagLinearOperator(noise.sqrt()), dim=-1)

    def inv_quad_logdet(
        self, inv_quad_rhs: Tensor | None = None, logdet: bool | None = False, reduce_inv_quad: bool | None = True
    ) -> tuple[Tensor | None, Tensor | None]:
        if inv_quad_rhs is None and not logdet:
            return None, None
        if self.size(-1) == 0:
            # log p of no data is 0, and GPyTorch's ExactMarginalLogLikelihood divides it by N = 0.
            raise ValueError(
                "The marginal likelihood of 0 training points is undefined (per point, 0 / 0): give the model at "
                "least one training point (model.set_train_data) before evaluating it."
            )
        rhs = None
        if inv_quad_rhs is not None:
            rhs = inv_quad_rhs.unsqueeze(-1) if inv_quad_rhs.dim() == 1 else inv_quad_rhs
            if rhs.size(-2) != self.size(-1):
                raise RuntimeError(
                    f"LinearOperator (size={self.shape}) cannot be multiplied with right-hand side of size {rhs.shape}."
                )
        root = self.feature_root
        # Fewer points than features (e.g. early Bayesian optimization): the N x N route is the cheaper one.
        route = choose_route("likelihood", root.num_points, root.num_columns, self.batch_shape)
        terms = _dense_terms if route == "points" else _feature_space_terms
        inv_quad_term, logdet_term = terms(root, rhs, logdet)
        if inv_quad_term is not None and reduce_inv_quad:
            inv_quad_term = inv_quad_term.sum(-1)
        if logdet_term is not None:
            logdet_term = logdet_term.expand(self.batch_shape)
        return inv_quad_term, logdet_term

    def to_dense(self) -> Tensor:
        root = self._linear_op.feature_root
        if self.size(-1) > root.num_columns and root.versions not in _DENSE_WARNED_DRAWS:
            # Once per feature draw, i.e. once per model (a BoTorch loop builds a new model at every iteration);
            # every time for operators without draws (built by hand, not by a kernel).
            if root.versions:
                _DENSE_WARNED_DRAWS.add(root.versions)
            warnings.warn(
                f"Forming the dense {self.size(-1)} x {self.size(-1)} covariance of a random-feature kernel with "
                f"{root.num_columns} features (O(N^2) memory, O(N^3) factorisation): GPyTorch's "
                "MultivariateNormal.log_prob does this while linear_operator's fast_computations.log_prob is off, "
                "as BoTorch sets on import. One-line fix: build the model as "
                "gprf.botorch.RandomFeatureSingleTaskGP(train_X, train_Y, covar_module=...) instead of SingleTaskGP, "
                "or return gprf.distributions.MultivariateNormal from your ExactGP's forward; either keeps the "
                "O(N F^2) marginal likelihood. (Shown once per model.)",
                LowRankStructureWarning,
                stacklevel=2,
            )
        # The inner covariance's own dense evaluation would warn again, about kernel products.
        return self._linear_op._dense() + self._diag_tensor.to_dense()

    def add_diagonal(self, diag: Tensor) -> FeatureRootAddedDiagLinearOperator:
        return FeatureRootAddedDiagLinearOperator(self._linear_op, self._diag_tensor.add_diagonal(diag))

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return FeatureRootAddedDiagLinearOperator(self._linear_op, self._diag_tensor + other)
        return super().__add__(other)


def _feature_space_terms(root: FeatureRoot, rhs: Tensor | None, logdet: bool) -> tuple[Tensor | None, Tensor | None]:
    dtype = factor_dtype.value()
    solver = weight_space_solver.current()
    if solver.uses_cg(root.num_columns):  # P^T C^-1 P and log det C by preconditioned CG (large F)
        capacitance_quad, capacitance_logdet = cg_feature_space_terms(root, rhs, logdet, solver)
    else:
        factor, projection = root.factor(rhs)
        capacitance_quad = None if rhs is None else factor.solve_root(projection).square().sum(-2)
        capacitance_logdet = factor.logdet() if logdet else None
    noise = root.noise.to(dtype)
    inv_quad_term, logdet_term = None, None
    if rhs is not None:
        inv_quad = (rhs.to(dtype).square() / noise.unsqueeze(-1)).sum(-2) - capacitance_quad
        inv_quad_term = inv_quad.to(rhs.dtype)
    if logdet:
        noise_logdet = noise.log().expand(*noise.shape[:-1], root.num_points).sum(-1)
        logdet_term = (capacitance_logdet + noise_logdet).to(root.dtype)
    return inv_quad_term, logdet_term


def _dense_terms(root: FeatureRoot, rhs: Tensor | None, logdet: bool) -> tuple[Tensor | None, Tensor | None]:
    r""":math:`K = s\,RR^\top + \Sigma` formed and factored in the factor dtype: :math:`O(N^2F + N^3)`, the points
    route (:func:`gprf.linalg.choose_route`)."""
    # Targets do not enter K: their finiteness is checked with the factor's (one synchronisation).
    factor = factor_points(root, rhs)
    inv_quad_term, logdet_term = None, None
    if rhs is not None:
        inv_quad_term = factor.whiten(rhs.to(factor.cholesky.dtype)).square().sum(-2).to(rhs.dtype)
    if logdet:
        logdet_term = (2 * factor.cholesky.diagonal(dim1=-2, dim2=-1).log().sum(-1)).to(root.dtype)
    return inv_quad_term, logdet_term
