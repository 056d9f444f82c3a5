"""gprf.cli.kernel_spec: composite specs build the GPyTorch expression they read as (structure, columns, values),
and malformed specs are refused with the position and what was expected."""

from __future__ import annotations

import pytest
import torch
from gpytorch.kernels import (
    AdditiveKernel,
    AdditiveStructureKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    ProductKernel,
    RBFKernel,
    ScaleKernel,
)

from gprf.cli.kernel_spec import is_composite_spec, parse_kernel_spec


def test_products_and_sums_with_columns_build_the_expression_and_its_values():
    kernel = parse_kernel_spec("rbf[0:3]*matern52[3:6]+linear", 6)
    assert isinstance(kernel, AdditiveKernel) and all(isinstance(part, ScaleKernel) for part in kernel.kernels)
    product, linear = (part.base_kernel for part in kernel.kernels)
    assert isinstance(product, ProductKernel) and isinstance(linear, LinearKernel)
    rbf, matern = product.kernels
    assert isinstance(rbf, RBFKernel) and rbf.active_dims.tolist() == [0, 1, 2] and rbf.ard_num_dims == 3
    assert isinstance(matern, MaternKernel) and matern.nu == 2.5 and matern.active_dims.tolist() == [3, 4, 5]
    assert linear.active_dims.tolist() == list(range(6))
    x = torch.rand(5, 6, dtype=torch.float64)
    kernel = kernel.double()
    softplus_zero = 0.6931471805599453  # the initial outputscales and linear variance
    expected = (
        RBFKernel().double()(x[:, :3]).to_dense() * MaternKernel(nu=2.5).double()(x[:, 3:]).to_dense()
        + softplus_zero * x @ x.T
    ) * softplus_zero
    torch.testing.assert_close(kernel(x).to_dense(), expected)


def test_columns_lists_parentheses_additive_and_polynomials():
    kernel = parse_kernel_spec("(rbf[0] + matern12[1,3]) * poly2[2]", 4)
    assert isinstance(kernel, ProductKernel)
    total, poly = kernel.kernels
    assert isinstance(poly, PolynomialKernel) and poly.power == 2 and poly.active_dims.tolist() == [2]
    assert [part.base_kernel.active_dims.tolist() for part in total.kernels] == [[0], [1, 3]]
    additive = parse_kernel_spec("additive(matern32)[0:20]", 25)
    assert isinstance(additive, AdditiveStructureKernel) and additive.num_dims == 20
    assert additive.base_kernel.nu == 1.5 and additive.active_dims.tolist() == list(range(20))


def test_composite_specs_are_told_from_single_kernels():
    assert not is_composite_spec("rbf") and not is_composite_spec("matern52")
    assert all(map(is_composite_spec, ["rbf[0:2]", "rbf*linear", "linear", "poly3", "additive(rbf)"]))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rbf[0:3]*periodic", r"a kernel name \(rbf, .*\), not 'periodic' at position 9"),
        ("rbf[0:7]", r"an end column in 1 \.\. 6"),
        ("rbf[6]", r"a column in 0 \.\. 5 \(the data has 6 columns\)"),
        ("rbf+", r"expected a name at position 4"),
        ("(rbf", r"expected '\)'"),
        ("rbf rbf", r"expected '\+', '\*' or the end at position 4"),
        ("additive(linear)", r"a stationary kernel inside additive"),
        ("rbf % linear", r"a kernel name, a number or one of"),
        ("poly0", r"not 'poly0'"),
    ],
)
def test_malformed_specs_name_the_position_and_what_was_expected(text, message):
    with pytest.raises(ValueError, match=message):
        parse_kernel_spec(text, 6)
