"""Sphinx configuration of the gprf documentation.

Build (nitpicky: every cross-reference must resolve; warnings are errors, as in CI)::

    python -m sphinx -n -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import sys

# The package is normally installed (editable) in the build environment; fall back to the checkout.
sys.path.insert(0, os.path.abspath(".."))

import gprf

# -- Project -------------------------------------------------------------------------------------------
project = "gprf"
author = "the gprf developers"
copyright = "the gprf developers"
version = gprf.__version__
release = gprf.__version__

# -- General -------------------------------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"
# Every cross-reference must resolve (``-n`` on the command line does the same): gprf's own through the API pages,
# the other projects' through the inventories below, apart from the undocumented objects of ``nitpick_ignore``.
nitpicky = True

# -- Intersphinx ---------------------------------------------------------------------------------------
# Links to the documentation of Python, PyTorch, GPyTorch, linear_operator and BoTorch. The build never goes
# online: each project's only inventory is the small file committed in docs/_intersphinx/, written by
# docs/_intersphinx/make_inventories.py, whose TABLE holds the base URLs used here and records where every
# URL pattern comes from (add an entry there and rerun it when the docs reference a new object).
sys.path.insert(0, os.path.abspath("_intersphinx"))
from make_inventories import TABLE  # noqa: E402
from sphinx.ext.intersphinx import missing_reference  # noqa: E402

intersphinx_mapping = {project: (url, (f"_intersphinx/{project}.inv",)) for project, (url, _pages) in TABLE.items()}

# Objects that annotations and docstrings name but whose projects do not document them, so no inventory has a
# page to link: GPyTorch's and linear_operator's internal classes, BoTorch's DEFAULT sentinel type, torch's
# process group (``dist.ProcessGroup`` as gprf's annotations spell it; torch's distributed page names the class only
# in prose).
nitpick_ignore = [
    ("py:class", "gpytorch.likelihoods.gaussian_likelihood._GaussianLikelihoodBase"),
    ("py:class", "_GaussianLikelihoodBase"),
    ("py:class", "gpytorch.mlls.marginal_log_likelihood.MarginalLogLikelihood"),
    ("py:class", "gpytorch.models.exact_prediction_strategies.DefaultPredictionStrategy"),
    ("py:class", "linear_operator.operators.dense_linear_operator.DenseLinearOperator"),
    ("py:class", "linear_operator.operators.kernel_linear_operator.KernelLinearOperator"),
    ("py:class", "linear_operator.operators.KernelLinearOperator"),
    ("py:class", "linear_operator.operators.low_rank_root_linear_operator.LowRankRootLinearOperator"),
    (
        "py:class",
        "linear_operator.operators.low_rank_root_added_diag_linear_operator.LowRankRootAddedDiagLinearOperator",
    ),
    ("py:class", "linear_operator.utils.warnings.NumericalWarning"),
    ("py:exc", "NotPSDError"),
    ("py:class", "_DefaultType"),
    ("py:class", "torch.distributed.distributed_c10d.ProcessGroup"),
    ("py:class", "dist.ProcessGroup"),
]

# Annotations that autodoc renders as written (GPyTorch's and BoTorch's signatures that gprf classes inherit, and
# gprf's own under ``from __future__ import annotations``) name classes and gprf's type aliases by their imported
# short names: the documented objects they stand for.
SHORT_NAMES = {
    "Tensor": "torch.Tensor",
    "Module": "torch.nn.Module",
    "Kernel": "gpytorch.kernels.Kernel",
    "IndexKernel": "gpytorch.kernels.IndexKernel",
    "Prior": "gpytorch.priors.Prior",
    "Interval": "gpytorch.constraints.Interval",
    "Mean": "gpytorch.means.Mean",
    "Likelihood": "gpytorch.likelihoods.Likelihood",
    "ExactGP": "gpytorch.models.ExactGP",
    "ExactMarginalLogLikelihood": "gpytorch.mlls.ExactMarginalLogLikelihood",
    "LinearOperator": "linear_operator.LinearOperator",
    "DiagLinearOperator": "linear_operator.operators.DiagLinearOperator",
    "InputTransform": "botorch.models.transforms.input.InputTransform",
    "OutcomeTransform": "botorch.models.transforms.outcome.OutcomeTransform",
    "MultiTaskGP": "botorch.models.multitask.MultiTaskGP",
    "SamplePath": "botorch.sampling.pathwise.paths.SamplePath",
    "Number": "numbers.Number",
    "BudgetOverride": "gprf.conversion.budget.BudgetOverride",
    "FeatureFunction": "gprf.linalg.chunked_gram.FeatureFunction",
}


def resolve_short_name(app, env, node, contnode):
    """Resolve a short annotation name of :data:`SHORT_NAMES` (``missing-reference``): gprf's through these pages,
    the others through the inventories."""
    target = SHORT_NAMES.get(node.get("reftarget"))
    if node.get("refdomain") != "py" or target is None:
        return None
    full = node.deepcopy()
    full["reftarget"] = target
    if target.startswith("gprf."):
        python = env.get_domain("py")
        return python.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], target, full, contnode)
    return missing_reference(app, env, full, contnode)


def setup(app):
    app.connect("missing-reference", resolve_short_name)


# -- Autodoc / napoleon --------------------------------------------------------------------------------
autodoc_typehints = "description"
autodoc_member_order = "bysource"
# Only gprf's own docstrings: methods that override GPyTorch/torch methods without a docstring of their
# own are not documented with the parent's text.
autodoc_inherit_docstrings = False
autodoc_class_signature = "mixed"

napoleon_google_docstring = True
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_param = True
napoleon_include_init_with_doc = False

# -- HTML ----------------------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"gprf {release}"
html_theme_options = {
    "description": "Random-feature kernels as first-class GPyTorch kernels",
    "fixed_sidebar": True,
    "show_powered_by": False,
}
