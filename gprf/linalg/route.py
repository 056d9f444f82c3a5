r"""Which space a feature-root GP computes in: the :math:`N\times N` covariance or the :math:`F\times F` capacitance.

For :math:`K = s\,RR^\top + \Sigma` with :math:`N` points and :math:`F` features, every consumer can work with
:math:`K` itself (the *points* route) or, by the Woodbury identity and the matrix determinant lemma, with the
capacitance :math:`C = I + s\,R^\top\Sigma^{-1}R` (the *features* route). Both are exact for the random-feature
kernel. Their costs per batch member, in multiply-adds:

* likelihood: points :math:`N^2F + N^3/3`, features :math:`NF^2 + F^3/3`;
* prediction at :math:`M` points: points :math:`M(NF + N^2) + M^2(F + N)`, features :math:`MF^2`, plus
  :math:`M^2F` for :math:`M \le F`;
* pathwise update of :math:`S` paths: points :math:`N^2F + N^3/3 + 2S(NF + N^2)`, features
  :math:`NF^2 + 4F^3/3 + 3SF^2`.

A prediction's training caches are built once per model and reused by every call, so predictions compare the cost
per call. The points route returns the posterior covariance at :math:`M` points as a dense matrix (as the features
route does up to :math:`M = F`; beyond, it returns a low-rank root, and the points route is never the cheaper one).
The batch shape multiplies both costs alike but bounds the memory of the
points route (:class:`gprf.settings.covariance_route`'s ``max_points_bytes``).
"""

from __future__ import annotations

import math

import torch

from gprf.settings import covariance_route, factor_dtype

USES = ("likelihood", "prediction", "pathwise")


def route_costs(
    use: str, num_points: int, num_columns: int, num_test: int = 0, num_samples: int = 0
) -> tuple[float, float]:
    """The multiply-adds per batch member of the points route and of the features route for ``use`` (module
    docstring)."""
    n, f, m, s = float(num_points), float(num_columns), float(num_test), float(num_samples)
    if use == "likelihood":
        return n * n * f + n**3 / 3, n * f * f + f**3 / 3
    if use == "prediction":
        return m * (n * f + n * n) + m * m * (f + n), m * f * f + (m * m * f if m <= f else 0.0)
    if use == "pathwise":
        return n * n * f + n**3 / 3 + 2 * s * (n * f + n * n), n * f * f + 4 * f**3 / 3 + 3 * s * f * f
    raise ValueError(f"use must be one of {', '.join(USES)}, got {use!r}.")


def points_route_bytes(num_points: int, batch_shape: torch.Size | tuple[int, ...]) -> int:
    """Bytes of the batch of :math:`N\\times N` matrices the points route forms, in the factor dtype."""
    itemsize = torch.empty((), dtype=factor_dtype.value()).element_size()
    return math.prod(batch_shape) * num_points * num_points * itemsize


def choose_route(
    use: str,
    num_points: int,
    num_columns: int,
    batch_shape: torch.Size | tuple[int, ...] = (),
    *,
    num_test: int = 0,
    num_samples: int = 0,
) -> str:
    r"""``"points"`` or ``"features"``: the route :class:`gprf.settings.covariance_route` asks for, or under
    ``"auto"`` the cheaper one (:func:`route_costs`) whose memory fits.

    Args:
        use: ``"likelihood"``, ``"prediction"`` or ``"pathwise"``.
        num_points: :math:`N`, the training points.
        num_columns: :math:`F`, the columns of the real feature root.
        batch_shape: The batch shape of the training covariance.
        num_test: :math:`M`, the test points of a prediction.
        num_samples: :math:`S`, the sample paths of a pathwise update.

    Raises:
        ValueError: ``"points"`` is forced but its :math:`N\times N` matrices exceed the setting's
            ``max_points_bytes``.
    """
    setting = covariance_route.current()
    points_cost, features_cost = route_costs(use, num_points, num_columns, num_test, num_samples)
    fits = points_route_bytes(num_points, batch_shape) <= setting.max_points_bytes
    if setting.route == "features":
        return "features"
    if setting.route == "points":
        if not fits:
            raise ValueError(
                f"gprf.settings.covariance_route('points') would form {math.prod(batch_shape)} matrices of "
                f"{num_points} x {num_points} ({points_route_bytes(num_points, batch_shape) / 2**30:.3g} GiB), more "
                f"than its max_points_bytes={setting.max_points_bytes}; use covariance_route('auto') or "
                "covariance_route('features') (O(N F^2), no N x N matrix), or raise max_points_bytes."
            )
        return "points"
    return "points" if fits and points_cost < features_cost else "features"
