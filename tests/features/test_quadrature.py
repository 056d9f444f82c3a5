"""QuadratureFeatures SR(3,3): unbiasedness, the folded f(0) term, the digits reference, bad input."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from gprf.features import QUADRATURE_KERNELS, QUADRATURE_ROTATIONS, QuadratureFeatures, RandomFourierFeatures
from gprf.features.quadrature import arccos_kernel

pytestmark = pytest.mark.usefixtures("single_thread")

NUM_DRAWS = 4000
Z = 5.0


def _pairs(dim: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = 0.6 * torch.randn(6, dim, generator=generator, dtype=torch.float64)
    y = x + 0.5 * torch.randn(6, dim, generator=generator, dtype=torch.float64)
    y[0] = x[0]  # the diagonal
    y[1] = -x[1]  # opposite directions
    return x, y


@pytest.mark.parametrize("rotation", QUADRATURE_ROTATIONS)
@pytest.mark.parametrize("kernel", QUADRATURE_KERNELS)
@pytest.mark.parametrize("dim", [3, 6])
def test_unbiased(kernel, rotation, dim, float64):
    x, y = _pairs(dim)
    features = QuadratureFeatures(dim, 1, kernel=kernel, rotation=rotation, batch_shape=(NUM_DRAWS,), seed=11)
    estimates = (features(x) * features(y)).sum(-1)  # (draws, pairs)
    target = features.expected_kernel(x, y)
    standard_error = estimates.std(0) / math.sqrt(NUM_DRAWS)
    # arccos1 on the diagonal is exact (no variance): compare with an absolute floor there.
    assert bool(((estimates.mean(0) - target).abs() <= Z * standard_error + 1e-10).all()), (
        estimates.mean(0),
        target,
        standard_error,
    )


@pytest.mark.parametrize("order", [0, 1])
def test_arccos_closed_form_matches_defining_integral(order, generator):
    # k_n = 2 E[Theta(w.x) Theta(w.y) (w.x)^n (w.y)^n], w ~ N(0, I): Monte Carlo of the defining integral.
    x = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    y = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    w = torch.randn(400_000, 4, generator=generator, dtype=torch.float64)
    wx, wy = w @ x.mT, w @ y.mT
    samples = 2 * (wx > 0) * (wy > 0) * (wx * wy) ** order
    mean, se = samples.mean(0), samples.std(0) / math.sqrt(w.size(0))
    exact = arccos_kernel(x, y, order, diag=True)
    assert bool(((mean - exact).abs() <= Z * se).all())
    torch.testing.assert_close(arccos_kernel(x, y, order).diagonal(), exact)
    # Special values: k0(x, x) = 1, k0(x, -x) = 0, k1(x, x) = |x|^2; a zero vector has angle pi/2.
    if order == 0:
        torch.testing.assert_close(arccos_kernel(x, x, 0, diag=True), torch.ones(5, dtype=torch.float64))
        torch.testing.assert_close(arccos_kernel(x, -x, 0, diag=True), torch.zeros(5, dtype=torch.float64))
        torch.testing.assert_close(arccos_kernel(x, 0 * x, 0, diag=True), torch.full((5,), 0.5, dtype=torch.float64))
    else:
        torch.testing.assert_close(arccos_kernel(x, x, 1, diag=True), (x**2).sum(-1))


def test_folded_constant_term_has_zero_mean_weight(float64):
    # E[1 - sum_j d / ((d+1) rho_j^2)] = 0 for rho_j ~ chi_{d+2}: folding the f(0) term keeps the map unbiased.
    d = 16
    features = QuadratureFeatures(d, 1, batch_shape=(NUM_DRAWS,), seed=3)
    weight = 1 - (d / ((d + 1) * features.radii**2)).sum(-1)
    assert abs(weight.mean().item()) <= Z * weight.std().item() / math.sqrt(NUM_DRAWS)
    # Stratified radii: every radius is still chi_{d+2} (mean of 1/rho^2 = 1/d) ...
    inverse = 1 / features.radii.flatten() ** 2
    assert abs(inverse.mean().item() - 1 / d) <= Z * inverse.std().item() / math.sqrt(inverse.numel())
    # ... and the sum of the node weights is far less variable than with iid radii (Var = 2/((d+1)(d-2)) there;
    # measured ratio about 0.06 at d = 16 and 0.007 at d = 64).
    assert weight.var().item() < 0.2 * 2 / ((d + 1) * (d - 2))


def test_rbf_diagonal_and_arccos1_radius_free(float64, generator):
    x = torch.randn(7, 4, generator=generator)
    rbf = QuadratureFeatures(4, 3, seed=0)
    # Unit diagonal up to the folded term: sum_j c_j averages to 1.
    diag = (rbf(x) ** 2).sum(-1)
    torch.testing.assert_close(diag, diag[:1].expand(7))
    # arccos1 is homogeneous: the radii cancel and k_hat(x, x) = |x|^2 * sum_j (v_j^T Q^T x)^2 d / ((d+1)|x|^2) = |x|^2.
    relu = QuadratureFeatures(4, 2, kernel="arccos1", seed=0)
    torch.testing.assert_close((relu(x) ** 2).sum(-1), (x**2).sum(-1))


@pytest.mark.parametrize("rotation", QUADRATURE_ROTATIONS)
def test_shapes_counts_and_contract(rotation, float64, generator):
    features = QuadratureFeatures(5, 3, kernel="arccos0", rotation=rotation, batch_shape=(2,), seed=4)
    p = 5 if rotation == "haar" else 8
    assert features.num_features == 2 * 3 * (p + 1) == QuadratureFeatures.features_per_rule(5, rotation) * 3
    x = torch.randn(4, 7, 5, generator=generator)
    phi = features(x.unsqueeze(1))
    assert phi.shape == (4, 2, 7, features.num_features)
    fresh = QuadratureFeatures(5, 3, kernel="arccos0", rotation=rotation, batch_shape=(2,), seed=99)
    fresh.load_state_dict(features.state_dict())
    torch.testing.assert_close(fresh(x.unsqueeze(1)), phi)
    torch.testing.assert_close(copy.deepcopy(features)(x.unsqueeze(1)), phi)
    features.resample(torch.Generator().manual_seed(1))
    assert not torch.allclose(features(x.unsqueeze(1)), phi)
    single = QuadratureFeatures(5, 3, kernel="arccos1", rotation=rotation, seed=0).float()
    assert single(x.float()).dtype == torch.float32


def test_gradients_reach_inputs(float64, generator):
    x = torch.randn(4, 3, generator=generator, requires_grad=True)
    for kernel in ("rbf", "arccos1"):
        QuadratureFeatures(3, 2, kernel=kernel, rotation="butterfly", seed=0)(x).sum().backward()
        assert x.grad is not None and torch.isfinite(x.grad).all()


def test_low_dimension_warning():
    with pytest.warns(UserWarning, match="infinite variance"):
        QuadratureFeatures(2, 1, kernel="rbf")
    with pytest.warns(UserWarning, match="infinite variance"):
        QuadratureFeatures(1, 1, kernel="arccos0", rotation="butterfly")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        QuadratureFeatures(2, 1, kernel="arccos1")
        QuadratureFeatures(3, 1, kernel="rbf", rotation="butterfly")


def test_bad_input():
    with pytest.raises(ValueError, match="num_rules"):
        QuadratureFeatures(3, 0)
    with pytest.raises(ValueError, match="'rbf', 'arccos0', 'arccos1'"):
        QuadratureFeatures(3, 1, kernel="matern")
    with pytest.raises(ValueError, match="'haar', 'butterfly'"):
        QuadratureFeatures(3, 1, rotation="givens")
    with pytest.raises(ValueError, match="input dimension 3"):
        QuadratureFeatures(3, 1)(torch.zeros(2, 4))


def _digits_errors(kernel: str, method: str, repeats: int = 3) -> float:
    from sklearn.datasets import load_digits

    data = torch.as_tensor(load_digits().data, dtype=torch.float64)
    data = data / data.max()
    d = data.size(-1)
    errors = []
    for rep in range(repeats):
        generator = torch.Generator().manual_seed(rep)
        x = data[torch.randperm(data.size(0), generator=generator)[:550]]
        if kernel == "rbf":  # gamma = 1/d: lengthscale sqrt(d/2)
            z = x / math.sqrt(d / 2)
            exact = torch.exp(-0.5 * torch.cdist(z, z) ** 2)
        else:
            z, exact = x, arccos_kernel(x, x, order=1)
        if method == "SR":
            phi = QuadratureFeatures(d, 1, kernel=kernel, seed=rep)(z)
        elif kernel == "rbf":
            phi = RandomFourierFeatures(d, 2 * (d + 1), sampler="orthogonal", seed=rep)(z)
        else:  # iid Gaussian arc-cosine-1 features, same number of features as one rule
            w = torch.randn(2 * (d + 1), d, generator=generator, dtype=torch.float64)
            phi = torch.relu(z @ w.mT) * math.sqrt(2 / w.size(0))
        errors.append((torch.linalg.norm(phi @ phi.mT - exact) / torch.linalg.norm(exact)).item())
    return sum(errors) / len(errors)


def test_digits_reference(float64):
    # Paper 003 protocol (X / max, 550 points, one rule = 2(d+1) features): arccos1 SR(3,3) ~ 0.017 vs iid ~ 0.1-0.2.
    sr, iid = _digits_errors("arccos1", "SR"), _digits_errors("arccos1", "G")
    assert sr < 0.025 and sr < iid / 4, (sr, iid)
    sr_rbf, orf = _digits_errors("rbf", "SR"), _digits_errors("rbf", "ORF")
    assert sr_rbf < orf, (sr_rbf, orf)
