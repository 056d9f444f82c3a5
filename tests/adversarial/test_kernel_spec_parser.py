"""Adversarial ``--kernel`` specs (:mod:`gprf.cli.kernel_spec`): malformed, oversized and unicode text is a
:class:`KernelSpecError` naming the position; property-based: any sequence of the grammar's tokens either is refused
that way or builds a kernel whose matrix is symmetric and positive semi-definite, and which ``gprf.random_features``
approximates with a feature root of the same shape."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import gprf
from gprf.cli.kernel_spec import MAX_NESTING, KernelSpecError, parse_kernel_spec, read_kernel_spec
from gprf.linalg import covariance_root
from tests.helpers.properties import PROPERTIES

NUM_DIMS = 4


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "expected a kernel name at position 0"),
        ("   ", "expected a kernel name at position 3"),
        ("RBF", r"expected a kernel name, a number or one of \+ \* .* at position 0"),
        ("rbf rbf", r"expected '\+', '\*' or the end at position 4"),
        ("rbf**rbf", "expected a kernel name at position 4"),
        ("rbf[]", r"expected a column in 0 \.\. 3 \(the data has 4 columns\) at position 4"),
        ("rbf[-1]", r"expected a column in 0 \.\. 3"),
        ("rbf[4]", r"expected a column in 0 \.\. 3"),
        ("rbf[3:1]", r"expected an end column in 4 \.\. 4"),
        ("rbf[0:9999999999]", r"expected an end column in 1 \.\. 4"),
        ("rbf[99999999999999999999]", r"expected a column in 0 \.\. 3"),
        ("rbf[0,]", r"expected a column in 0 \.\. 3"),
        ("poly0", r"not 'poly0'"),
        ("poly99999999999", r"not 'poly99999999999'"),
        ("additive(linear)", r"expected a stationary kernel inside additive\(\.\.\.\)"),
        ("additive(rbf", r"expected '\)'"),
        ("(rbf", r"expected '\)'"),
        ("rbf)", r"expected '\+', '\*' or the end"),
        ("rbf+λ", "expected a kernel name, a number or one of .* at position 4"),
        ("rbf\x00", "expected a kernel name, a number or one of .* at position 3"),
        ("(" * (MAX_NESTING + 1) + "rbf" + ")" * (MAX_NESTING + 1), f"parentheses nest at most {MAX_NESTING} deep"),
        ("rbf+" * 5000 + "x", "not 'x'"),
    ],
    ids=lambda value: value[:24],  # the long specs would make unreadable test names
)
def test_malformed_specs_are_kernel_spec_errors_naming_the_position(text, match):
    with pytest.raises(KernelSpecError, match=match) as error:
        read_kernel_spec(text, NUM_DIMS)
    assert len(str(error.value)) < 600  # long specs are shortened in the message


def test_the_deepest_nesting_allowed_reads():
    text = "(" * MAX_NESTING + "rbf" + ")" * MAX_NESTING
    assert read_kernel_spec(text, NUM_DIMS) == read_kernel_spec("rbf", NUM_DIMS)


def test_a_kernel_spec_error_is_a_value_error_with_the_detail_for_argparse():
    with pytest.raises(ValueError) as error:
        read_kernel_spec("rbf[", NUM_DIMS)
    assert isinstance(error.value, KernelSpecError) and error.value.detail.startswith("expected")


_TOKENS = st.sampled_from(
    [
        "rbf",
        "matern12",
        "matern52",
        "linear",
        "poly2",
        "poly3",
        "additive(rbf)",
        "+",
        "*",
        "(",
        ")",
        "[0:2]",
        "[1,3]",
        "[3]",
        "[0:4]",
    ]
)


_BASE_TEXTS = st.tuples(
    st.sampled_from(["rbf", "matern12", "matern52", "linear", "poly2", "additive(rbf)"]),
    st.sampled_from(["", "[0:2]", "[1,3]", "[3]", "[0:4]"]),
).map("".join)
#: Texts of the grammar: sums of products of bases, some parenthesised.
_GRAMMAR_TEXTS = st.recursive(
    _BASE_TEXTS,
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("+".join),
        st.lists(inner, min_size=2, max_size=3).map("*".join),
        inner.map(lambda text: f"({text})"),
    ),
    max_leaves=5,
)


@PROPERTIES
@given(text=st.one_of(_GRAMMAR_TEXTS, st.lists(_TOKENS, min_size=1, max_size=9).map("".join)))
def test_any_token_sequence_is_refused_or_builds_a_psd_kernel_that_random_features_approximate(text):
    try:
        kernel = parse_kernel_spec(text, NUM_DIMS).double()
    except KernelSpecError as error:
        assert "expected" in str(error)
        return
    x = torch.randn(12, NUM_DIMS, generator=torch.Generator().manual_seed(0), dtype=torch.float64) / 2
    dense = kernel(x).to_dense()
    torch.testing.assert_close(dense, dense.mT, rtol=0, atol=1e-12)
    eigenvalues = torch.linalg.eigvalsh(dense)
    assert float(eigenvalues.min()) >= -1e-9 * max(1.0, float(eigenvalues.max()))
    approximation = gprf.random_features(kernel, 64, seed=0, num_dims=NUM_DIMS)
    root = covariance_root(approximation, x).scaled_features()
    assert root.shape[-2] == 12 and bool(root.isfinite().all())
