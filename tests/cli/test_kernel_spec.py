"""gprf.cli.kernel_spec: composite specs build the GPyTorch expression they read as (structure, columns, values),
and malformed specs are refused with the position and what was expected: always as a KernelSpecError, never another
exception (property tests over random specs and random text)."""

from __future__ import annotations

import string

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
from hypothesis import given, settings
from hypothesis import strategies as st

from gprf.cli.kernel_spec import (
    MAX_NESTING,
    Additive,
    Base,
    KernelSpecError,
    Product,
    Spec,
    Sum,
    build_kernel,
    is_composite_spec,
    parse_kernel_spec,
    read_kernel_spec,
)


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
        ("rbf+", r"expected a kernel name at position 4"),
        ("(rbf", r"expected '\)'"),
        ("rbf rbf", r"expected '\+', '\*' or the end at position 4"),
        ("additive(linear)", r"a stationary kernel inside additive"),
        ("rbf % linear", r"a kernel name, a number or one of"),
        ("poly0", r"not 'poly0'"),
    ],
)
def test_malformed_specs_name_the_position_and_what_was_expected(text, message):
    with pytest.raises(KernelSpecError, match=message):
        parse_kernel_spec(text, 6)


def test_parentheses_nest_up_to_the_limit_and_deeper_ones_are_refused_without_recursing():
    def nested(depth: int) -> str:
        return "(" * depth + "rbf" + ")" * depth

    assert read_kernel_spec(nested(MAX_NESTING), 2) == Base("rbf")
    with pytest.raises(KernelSpecError, match=f"parentheses nest at most {MAX_NESTING} deep at position {MAX_NESTING}"):
        read_kernel_spec(nested(MAX_NESTING + 1), 2)
    with pytest.raises(KernelSpecError, match=r"^--kernel '\({40}\.\.\.': expected a kernel name") as error:
        read_kernel_spec(nested(20_000), 2)
    assert len(str(error.value)) < 300  # long specs are shortened in the message


def test_without_the_data_width_only_the_syntax_is_read_and_no_column_range_is_expanded():
    spec = read_kernel_spec("linear + rbf[5:999999999] * poly3[7, 8]")
    assert spec == Sum((Base("linear"), Product((Base("rbf", range(5, 999999999)), Base("poly", (7, 8), 3)))))
    with pytest.raises(KernelSpecError, match="an end column in 6 .. 10 at position 15"):
        read_kernel_spec("linear + rbf[5:999999999]", 10)
    with pytest.raises(KernelSpecError, match="a column number of at most 9 digits at position 4"):
        read_kernel_spec("rbf[1234567890]")
    with pytest.raises(KernelSpecError, match="not 'poly1234567890'"):
        read_kernel_spec("poly1234567890")


# ----------------------------------------------------------------------------------------- property tests
NUM_DIMS = 6
_STATIONARY = ("rbf", "matern12", "matern32", "matern52")
_COLUMNS = st.one_of(
    st.none(),
    st.integers(0, NUM_DIMS - 1).flatmap(lambda a: st.integers(a + 1, NUM_DIMS).map(lambda b: range(a, b))),
    st.lists(st.integers(0, NUM_DIMS - 1), min_size=1, max_size=4).map(tuple),
)
_LEAVES = st.one_of(
    st.builds(Base, st.sampled_from((*_STATIONARY, "linear")), _COLUMNS),
    st.builds(Base, st.just("poly"), _COLUMNS, st.integers(1, 12)),
    st.builds(Additive, st.sampled_from(_STATIONARY), _COLUMNS),
)
_SPECS = st.recursive(
    _LEAVES,
    lambda parts: st.one_of(
        st.lists(parts, min_size=2, max_size=3).map(lambda terms: Sum(tuple(terms))),
        st.lists(parts, min_size=2, max_size=3).map(lambda factors: Product(tuple(factors))),
    ),
    max_leaves=10,
)


def _columns_text(columns) -> str:
    if columns is None:
        return ""
    if isinstance(columns, range):
        return f"[{columns.start}:{columns.stop}]"
    return "[" + ",".join(map(str, columns)) + "]"


def _render(spec: Spec, space: str) -> str:
    """The text of a syntax tree, with the parentheses its structure needs (a sum inside a sum or a product, a
    product inside a product) and ``space`` between tokens."""
    if isinstance(spec, Base):
        name = f"poly{spec.degree}" if spec.name == "poly" else spec.name
        return name + _columns_text(spec.columns).replace(",", f",{space}")
    if isinstance(spec, Additive):
        return f"additive({space}{spec.base}{space}){_columns_text(spec.columns)}"
    parts = []
    for part in spec.terms if isinstance(spec, Sum) else spec.factors:
        text = _render(part, space)
        grouped = isinstance(part, Sum) or (isinstance(part, Product) and isinstance(spec, Product))
        parts.append(f"({space}{text}{space})" if grouped else text)
    return f"{space}{'+' if isinstance(spec, Sum) else '*'}{space}".join(parts)


def _leaves(spec: Spec) -> list[Spec]:
    if isinstance(spec, Sum | Product):
        return [leaf for part in (spec.terms if isinstance(spec, Sum) else spec.factors) for leaf in _leaves(part)]
    return [spec]


def _built_leaves(kernel) -> list:
    """The base kernels of a built expression, left to right (amplitudes and sums/products unwrapped)."""
    if isinstance(kernel, ScaleKernel):
        return _built_leaves(kernel.base_kernel)
    if isinstance(kernel, AdditiveKernel | ProductKernel):
        return [leaf for part in kernel.kernels for leaf in _built_leaves(part)]
    return [kernel]


@settings(max_examples=150, deadline=None)
@given(spec=_SPECS, space=st.sampled_from(["", " ", "  "]))
def test_any_spec_printed_as_text_reads_back_as_the_same_tree(spec, space):
    text = _render(spec, space)
    assert read_kernel_spec(text, NUM_DIMS) == spec
    assert read_kernel_spec(text) == spec


@settings(max_examples=60, deadline=None)
@given(spec=_SPECS)
def test_any_spec_builds_its_kernels_on_their_columns(spec):
    expected = {
        Base: lambda leaf: {"linear": LinearKernel, "poly": PolynomialKernel, "rbf": RBFKernel}.get(leaf.name),
        Additive: lambda leaf: AdditiveStructureKernel,
    }
    kernels = _built_leaves(build_kernel(spec, NUM_DIMS))
    leaves = _leaves(spec)
    assert len(kernels) == len(leaves)
    for kernel, leaf in zip(kernels, leaves, strict=True):
        assert isinstance(kernel, expected[type(leaf)](leaf) or MaternKernel)
        columns = list(leaf.columns) if leaf.columns is not None else list(range(NUM_DIMS))
        assert kernel.active_dims.tolist() == columns
        if isinstance(leaf, Base) and leaf.name == "poly":
            assert kernel.power == leaf.degree


_SPEC_ALPHABET = string.ascii_lowercase[:16] + "0123456789+*()[]:, " + "poly" + "additive"


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(_SPEC_ALPHABET, max_size=40), st.text(max_size=40)))
def test_any_text_either_reads_as_a_spec_or_is_a_kernel_spec_error(text):
    """Random text never escapes the parser as another exception (IndexError, RecursionError, int overflow...)."""
    for num_dims in (None, 3):
        try:
            spec = read_kernel_spec(text, num_dims)
        except KernelSpecError as error:
            assert "expected" in str(error) and len(str(error)) < 600
        else:
            assert isinstance(spec, Base | Additive | Sum | Product)
