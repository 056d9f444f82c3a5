"""gprf.exceptions: each warning and error subclasses the builtin it documents (so existing ``except`` clauses and
warning filters catch it) and is raised by the path that documents it."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import warnings
from pathlib import Path

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel
from linear_operator.operators import DenseLinearOperator
from linear_operator.utils.warnings import NumericalWarning

import gprf
from gprf import exceptions
from gprf.exceptions import (
    CollectiveError,
    ConjugateGradientWarning,
    DispatchFallbackWarning,
    GPRFWarning,
    IndefiniteKernelError,
    InfiniteVarianceWarning,
    LowRankStructureWarning,
    NonFiniteTrainingDataError,
    ShardMismatchError,
)
from gprf.features import QuadratureFeatures
from gprf.kernels import RandomFourierKernel
from gprf.linalg import cg_inv_quad_logdet
from gprf.prediction import FeatureSpacePredictionStrategy
from gprf.testing import regression_data
from tests.helpers.regression import make_model, signed_kernel, signed_model


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (ConjugateGradientWarning, NumericalWarning),
        (DispatchFallbackWarning, RuntimeWarning),
        (GPRFWarning, UserWarning),
        (IndefiniteKernelError, ValueError),
        (InfiniteVarianceWarning, UserWarning),
        (LowRankStructureWarning, UserWarning),
        (NonFiniteTrainingDataError, ValueError),
        (ShardMismatchError, ValueError),
        (CollectiveError, TimeoutError),
    ],
)
def test_each_error_subclasses_its_builtin(error, builtin):
    assert issubclass(error, builtin) and error.__doc__


def test_the_errors_users_catch_around_models_are_exported_at_the_top_level():
    for error in (DispatchFallbackWarning, GPRFWarning, LowRankStructureWarning, NonFiniteTrainingDataError):
        assert getattr(gprf, error.__name__) is error and error.__name__ in gprf.__all__


def _gprf_modules():
    """Every module of the gprf package, imported (the BoTorch integration and the CLI included)."""
    yield gprf
    for info in pkgutil.walk_packages(gprf.__path__, prefix="gprf."):
        yield importlib.import_module(info.name)


def test_every_warning_class_gprf_defines_derives_from_gprf_warning():
    defined = {
        cls
        for module in _gprf_modules()
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, Warning) and cls.__module__.startswith("gprf")
    }
    in_exceptions = {cls for _, cls in inspect.getmembers(exceptions, inspect.isclass)}
    assert in_exceptions >= defined >= {ConjugateGradientWarning, InfiniteVarianceWarning}
    assert all(issubclass(cls, GPRFWarning) for cls in defined), defined


def _warn_calls(tree: ast.AST):
    """The ``warnings.warn(...)`` and bare ``warn(...)`` calls of a module's syntax tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "warn":
                yield node


def test_gprf_never_warns_with_a_category_of_another_package():
    """Every ``warnings.warn`` in the source names its category, and that category is a gprf warning class."""
    sources = sorted(Path(gprf.__file__).parent.rglob("*.py"))
    calls = 0
    for path in sources:
        for call in _warn_calls(ast.parse(path.read_text(), filename=str(path))):
            calls += 1
            category = (
                call.args[1]
                if len(call.args) > 1
                else next((keyword.value for keyword in call.keywords if keyword.arg == "category"), None)
            )
            where = f"{path.name}:{call.lineno}"
            assert isinstance(category, ast.Name), f"{where}: warns without a named category"
            assert issubclass(getattr(exceptions, category.id, type(None)), GPRFWarning), (
                f"{where}: warns with {category.id}, not a gprf.exceptions class"
            )
    assert calls >= 6  # the scan does see gprf's warnings (CG, dispatch x2, low rank x2, quadrature)


def test_one_filter_on_gprf_warning_turns_every_gprf_warning_into_an_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error", GPRFWarning)
        with pytest.raises(LowRankStructureWarning):
            RandomFourierKernel(8, num_dims=2, seed=0) + RBFKernel()
        with pytest.raises(InfiniteVarianceWarning):
            QuadratureFeatures(2, 1, kernel="rbf")


def test_infinite_variance_warning_for_low_dimensional_quadrature():
    with pytest.warns(InfiniteVarianceWarning, match="infinite variance"):
        QuadratureFeatures(2, 1, kernel="rbf")


def test_conjugate_gradient_warning_when_the_solve_hits_max_iterations():
    generator = torch.Generator().manual_seed(0)
    root = torch.randn(40, 30, generator=generator, dtype=torch.float64)
    gram = root.mT @ root + torch.eye(30, dtype=torch.float64)
    projection = torch.randn(30, 2, generator=generator, dtype=torch.float64)
    with pytest.warns(ConjugateGradientWarning, match="max_iterations=2"):
        terms = cg_inv_quad_logdet(gram, projection, logdet=False, max_iterations=2, preconditioner_rank=0)
    assert not terms.converged and terms.iterations == 2


def test_dispatch_fallback_warning_when_the_covariances_have_no_feature_root():
    """Prediction handed dense covariances falls back to GPyTorch's dense strategy, loudly."""
    x, y = regression_data(n=20)
    model = make_model(x, y, num_features=8).eval()
    prior = model.forward(x)
    dense_prior = gpytorch.distributions.MultivariateNormal(prior.mean, DenseLinearOperator(prior.covariance_matrix))
    strategy = FeatureSpacePredictionStrategy([x], dense_prior, y, model.likelihood)
    joint = model.forward(torch.cat([x, x[:2]]))
    covariance = joint.covariance_matrix.detach()
    with pytest.warns(DispatchFallbackWarning, match="falling back"):
        strategy.exact_prediction(
            joint.mean[20:], DenseLinearOperator(covariance[20:, 20:]), DenseLinearOperator(covariance[20:, :20])
        )


def test_low_rank_structure_warning_when_a_dense_kernel_joins_a_feature_kernel():
    with pytest.warns(LowRankStructureWarning, match="dense"):
        RandomFourierKernel(8, num_dims=2, seed=0) + RBFKernel()


def test_indefinite_kernel_error_for_the_marginal_likelihood_of_a_signed_kernel():
    x, y = regression_data(n=20)
    model = signed_model(x, y, signed_kernel()).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with pytest.raises(IndefiniteKernelError, match="log-determinant"):
        mll(model(x), y)


def test_non_finite_training_data_error_counts_the_rows():
    x, y = regression_data(n=20)
    y[[2, 11]] = float("nan")
    model = make_model(x, y, num_features=8).eval()
    with pytest.raises(NonFiniteTrainingDataError, match="^2 of 20 training points"):
        model(x[:2])
