r"""Write the offline intersphinx inventories of this folder: ``{python,numpy,torch,gpytorch,linear_operator,botorch}.inv``.

The documentation build must not need the network, so ``docs/conf.py`` points ``intersphinx_mapping`` at these
files instead of the projects' ``objects.inv``. Each file lists only the objects gprf's docstrings and pages
refer to (through ``:class:``/``:func:``/``:mod:`` roles or the base classes and type hints autodoc renders),
plus the main public classes of the modules gprf builds on. Run it after adding an entry to ``TABLE``::

    python docs/_intersphinx/make_inventories.py            # rewrite the .inv files (deterministic)
    python docs/_intersphinx/make_inventories.py --check    # also import every name, check aliases

The URLs are not guessed: each block of ``TABLE`` names the documentation source that produces its page and
anchors. Sphinx's HTML builder puts an object documented in ``<page>.rst`` at ``<page>.html#<full.name>`` (a
module at ``#module-<name>``), and ``autosummary :toctree: generated`` gives each object its own page
``generated/<full.name>.html``. After the name, a line may list *aliases*: the defining-module path that
autodoc records as the ``:canonical:`` name of an object imported into a public namespace (that is the name
autodoc renders for gprf's base classes, e.g. ``gpytorch.kernels.kernel.Kernel``; the projects' own
inventories carry these aliases with priority -1, e.g. ``linear_operator.operators._linear_operator.LinearOperator``
in the ``linear_operator_objects.inv`` shipped in gpytorch's ``docs/source``), or another public spelling of
the same object. Objects a project does not document (``linear_operator.operators.DenseLinearOperator``,
``LowRankRootLinearOperator``, ``LowRankRootAddedDiagLinearOperator``; GPyTorch's prediction strategies and
noise models) have no URL to point to and are left out on purpose.

Checked: every GPyTorch, BoTorch and linear_operator entry (aliases apart) is in the ``objects.inv`` that Sphinx
writes for those projects' documentation sources (``docs/source`` of cornellius-gp/gpytorch and
cornellius-gp/linear_operator, ``sphinx/source`` of pytorch/botorch), with the same URI; ``--check`` imports every
name (torch and Python included) from the installed packages.

Format: Sphinx inventory version 2 (four header lines, then zlib-compressed lines
``name domain:role priority uri dispname``, uri relative to the base URL, ``-`` as dispname for the name), the
format ``sphinx.ext.intersphinx`` reads; ``python -m sphinx.ext.intersphinx docs/_intersphinx/X.inv``
lists a file.
"""

from __future__ import annotations

import importlib
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

# project -> (base URL, [(page, where the page and its anchors come from, entries)]).
# An entry line is "domain:role name [alias ...]"; "{name}" in a page is replaced by the entry's name.
TABLE: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "python": (
        "https://docs.python.org/3/",
        [
            (
                "library/collections.abc.html",
                "cpython Doc/library/collections.abc.rst: .. module:: / .. class::",
                """
                py:module collections.abc
                py:class collections.abc.Callable
                py:class collections.abc.Iterable
                py:class collections.abc.Iterator
                py:class collections.abc.Mapping
                py:class collections.abc.Sequence
            """,
            ),
            ("library/abc.html", "cpython Doc/library/abc.rst: .. class:: ABC", "py:class abc.ABC"),
            ("library/numbers.html", "cpython Doc/library/numbers.rst: .. class:: Number", "py:class numbers.Number"),
        ],
    ),
    # numpy/numpy doc/source (numpy.org/doc/stable is the documentation of the latest release).
    "numpy": (
        "https://numpy.org/doc/stable/",
        [
            (
                "reference/generated/{name}.html",
                "reference/arrays.ndarray.rst: .. currentmodule:: numpy / .. autosummary:: :toctree: generated/",
                "py:class numpy.ndarray",
            ),
        ],
    ),
    # pytorch/pytorch docs/source; https://pytorch.org/docs/stable/ is also the torch URL of GPyTorch's and
    # linear_operator's docs/source/conf.py (the site now redirects it to docs.pytorch.org/docs/stable/).
    "torch": (
        "https://pytorch.org/docs/stable/",
        [
            ("tensors.html", "tensors.rst: .. currentmodule:: torch / .. class:: Tensor()", "py:class torch.Tensor"),
            (
                "tensor_attributes.html",
                "tensor_attributes.rst: .. currentmodule:: torch / .. class:: dtype, device",
                """
                py:class torch.dtype
                py:class torch.device
            """,
            ),
            ("size.html", "size.rst: .. autoclass:: torch.Size", "py:class torch.Size"),
            (
                "generated/{name}.html",
                "torch.rst: .. currentmodule:: torch / .. autosummary:: :toctree: generated",
                """
                py:class torch.Generator torch._C.Generator
                py:class torch.quasirandom.SobolEngine
                py:function torch.manual_seed
                py:function torch.cholesky_solve
                py:function torch.view_as_complex
                py:function torch.view_as_real
            """,
            ),
            (
                "generated/{name}.html",
                "nn.rst: .. currentmodule:: torch.nn / .. autosummary:: :toctree: generated",
                """
                py:class torch.nn.Module torch.nn.modules.module.Module
                py:class torch.nn.ModuleList torch.nn.modules.container.ModuleList
            """,
            ),
            (
                "generated/{name}.html",
                "linalg.rst: .. currentmodule:: torch.linalg / .. autosummary:: :toctree: generated",
                """
                py:function torch.linalg.cholesky
                py:function torch.linalg.solve_triangular
            """,
            ),
            (
                "generated/{name}.html",
                "cuda.rst: .. currentmodule:: torch.cuda / .. autosummary:: :toctree: generated",
                """
                py:function torch.cuda.max_memory_allocated
            """,
            ),
            (
                "distributed.html",
                "distributed.rst: .. automodule:: torch.distributed / .. autofunction::",
                """
                py:module torch.distributed
                py:function torch.distributed.all_reduce
            """,
            ),
        ],
    ),
    # cornellius-gp/gpytorch docs/source; docs.gpytorch.ai is where GPyTorch's own notebooks link its API pages
    # (examples/01_Exact_GPs/Simple_GP_Regression.ipynb), the Read the Docs project gpytorch.readthedocs.io.
    "gpytorch": (
        "https://docs.gpytorch.ai/en/stable/",
        [
            (
                "kernels.html",
                "kernels.rst: .. automodule:: / .. currentmodule:: gpytorch.kernels / .. autoclass::",
                """
                py:module gpytorch.kernels
                py:class gpytorch.kernels.Kernel gpytorch.kernels.kernel.Kernel
                py:class gpytorch.kernels.AdditiveKernel gpytorch.kernels.kernel.AdditiveKernel
                py:class gpytorch.kernels.ProductKernel gpytorch.kernels.kernel.ProductKernel
                py:class gpytorch.kernels.ScaleKernel gpytorch.kernels.scale_kernel.ScaleKernel
                py:class gpytorch.kernels.RBFKernel gpytorch.kernels.rbf_kernel.RBFKernel
                py:class gpytorch.kernels.MaternKernel gpytorch.kernels.matern_kernel.MaternKernel
                py:class gpytorch.kernels.LinearKernel gpytorch.kernels.linear_kernel.LinearKernel
                py:class gpytorch.kernels.PolynomialKernel gpytorch.kernels.polynomial_kernel.PolynomialKernel
                py:class gpytorch.kernels.RFFKernel gpytorch.kernels.rff_kernel.RFFKernel
                py:class gpytorch.kernels.IndexKernel gpytorch.kernels.index_kernel.IndexKernel
                py:class gpytorch.kernels.AdditiveStructureKernel gpytorch.kernels.additive_structure_kernel.AdditiveStructureKernel
            """,
            ),
            (
                "likelihoods.html",
                "likelihoods.rst: .. automodule:: / .. currentmodule:: gpytorch.likelihoods / .. autoclass::",
                """
                py:module gpytorch.likelihoods
                py:class gpytorch.likelihoods.Likelihood gpytorch.likelihoods.likelihood.Likelihood
                py:class gpytorch.likelihoods.GaussianLikelihood gpytorch.likelihoods.gaussian_likelihood.GaussianLikelihood
                py:class gpytorch.likelihoods.FixedNoiseGaussianLikelihood gpytorch.likelihoods.gaussian_likelihood.FixedNoiseGaussianLikelihood
                py:class gpytorch.likelihoods.DirichletClassificationLikelihood gpytorch.likelihoods.gaussian_likelihood.DirichletClassificationLikelihood
            """,
            ),
            (
                "models.html",
                "models.rst: .. automodule:: / .. currentmodule:: gpytorch.models / .. autoclass:: ExactGP",
                """
                py:module gpytorch.models
                py:class gpytorch.models.ExactGP gpytorch.models.exact_gp.ExactGP
            """,
            ),
            (
                "distributions.html",
                "distributions.rst: .. automodule:: / .. currentmodule:: gpytorch.distributions / .. autoclass::",
                """
                py:module gpytorch.distributions
                py:class gpytorch.distributions.MultivariateNormal gpytorch.distributions.multivariate_normal.MultivariateNormal
                py:class gpytorch.distributions.MultitaskMultivariateNormal gpytorch.distributions.multitask_multivariate_normal.MultitaskMultivariateNormal
            """,
            ),
            (
                "marginal_log_likelihoods.html",
                "marginal_log_likelihoods.rst: .. automodule:: / .. currentmodule:: gpytorch.mlls / .. autoclass::",
                """
                py:module gpytorch.mlls
                py:class gpytorch.mlls.ExactMarginalLogLikelihood gpytorch.mlls.exact_marginal_log_likelihood.ExactMarginalLogLikelihood
            """,
            ),
            (
                "means.html",
                "means.rst: .. automodule:: / .. currentmodule:: gpytorch.means / .. autoclass::",
                """
                py:module gpytorch.means
                py:class gpytorch.means.Mean gpytorch.means.mean.Mean
                py:class gpytorch.means.ConstantMean gpytorch.means.constant_mean.ConstantMean
                py:class gpytorch.means.ZeroMean gpytorch.means.zero_mean.ZeroMean
            """,
            ),
            (
                "priors.html",
                "priors.rst: .. automodule:: / .. currentmodule:: gpytorch.priors / .. autoclass::",
                """
                py:module gpytorch.priors
                py:class gpytorch.priors.Prior gpytorch.priors.prior.Prior
            """,
            ),
            (
                "constraints.html",
                "constraints.rst: .. automodule:: / .. currentmodule:: gpytorch.constraints / .. autoclass::",
                """
                py:module gpytorch.constraints
                py:class gpytorch.constraints.Interval gpytorch.constraints.constraints.Interval
                py:class gpytorch.constraints.GreaterThan gpytorch.constraints.constraints.GreaterThan
                py:class gpytorch.constraints.Positive gpytorch.constraints.constraints.Positive
            """,
            ),
            (
                "module.html",
                "module.rst: .. autoclass:: gpytorch.Module",
                "py:class gpytorch.Module gpytorch.module.Module",
            ),
            # automodule :members: follows gpytorch.settings.__all__, which also re-exports linear_operator's settings.
            (
                "settings.html",
                "settings.rst: .. automodule:: gpytorch.settings :members:",
                """
                py:module gpytorch.settings
                py:class gpytorch.settings.cholesky_jitter
                py:class gpytorch.settings.detach_test_caches
                py:class gpytorch.settings.fast_computations
                py:class gpytorch.settings.fast_pred_var
                py:class gpytorch.settings.lazily_evaluate_kernels
                py:class gpytorch.settings.max_cholesky_size
                py:class gpytorch.settings.skip_posterior_variances
            """,
            ),
        ],
    ),
    # cornellius-gp/linear_operator docs/source (README: linear-operator.readthedocs.io; GPyTorch's conf.py maps
    # linear_operator to https://linear-operator.readthedocs.io/en/stable/).
    "linear_operator": (
        "https://linear-operator.readthedocs.io/en/stable/",
        [
            ("namespace.html", "namespace.rst: .. automodule:: linear_operator", "py:module linear_operator"),
            # Documented under its top-level name; gprf (and GPyTorch) import it from linear_operator.operators.
            (
                "linear_operator.html",
                "linear_operator.rst: .. autoclass:: linear_operator.LinearOperator",
                """
                py:class linear_operator.LinearOperator linear_operator.operators._linear_operator.LinearOperator linear_operator.operators.LinearOperator
            """,
            ),
            (
                "converting.html",
                "converting.rst: .. autofunction:: linear_operator.to_dense, to_linear_operator",
                """
                py:function linear_operator.to_dense
                py:function linear_operator.to_linear_operator
            """,
            ),
            (
                "data_sparse_operators.html",
                "data_sparse_operators.rst: .. autoclass:: linear_operator.operators.*",
                """
                py:class linear_operator.operators.CholLinearOperator linear_operator.operators.chol_linear_operator.CholLinearOperator
                py:class linear_operator.operators.ConstantDiagLinearOperator linear_operator.operators.diag_linear_operator.ConstantDiagLinearOperator
                py:class linear_operator.operators.DiagLinearOperator linear_operator.operators.diag_linear_operator.DiagLinearOperator
                py:class linear_operator.operators.IdentityLinearOperator linear_operator.operators.identity_linear_operator.IdentityLinearOperator
                py:class linear_operator.operators.RootLinearOperator linear_operator.operators.root_linear_operator.RootLinearOperator
                py:class linear_operator.operators.ZeroLinearOperator linear_operator.operators.zero_linear_operator.ZeroLinearOperator
            """,
            ),
            (
                "composition_decoration_operators.html",
                "composition_decoration_operators.rst: .. autoclass:: linear_operator.operators.*",
                """
                py:class linear_operator.operators.AddedDiagLinearOperator linear_operator.operators.added_diag_linear_operator.AddedDiagLinearOperator
                py:class linear_operator.operators.MatmulLinearOperator linear_operator.operators.matmul_linear_operator.MatmulLinearOperator
            """,
            ),
            (
                "structure.html",
                "structure.rst: .. autoclass:: linear_operator.operators.TriangularLinearOperator",
                """
                py:class linear_operator.operators.TriangularLinearOperator linear_operator.operators.triangular_linear_operator.TriangularLinearOperator
            """,
            ),
            (
                "settings.html",
                "settings.rst: .. automodule:: linear_operator.settings :members:",
                """
                py:module linear_operator.settings
                py:class linear_operator.settings.cholesky_jitter
                py:class linear_operator.settings.fast_computations
                py:attribute linear_operator.settings.fast_computations.log_prob
                py:class linear_operator.settings.max_cholesky_size
            """,
            ),
        ],
    ),
    # pytorch/botorch sphinx/source (.readthedocs.yaml builds it; docs/*.md link botorch.readthedocs.io/en/latest/).
    # Every page is "automodule:: <module> :members:", so objects are named by their defining module.
    "botorch": (
        "https://botorch.readthedocs.io/en/stable/",
        [
            (
                "models.html",
                "models.rst: .. automodule:: botorch.models(.gp_regression, .model, .gpytorch, .transforms.*, .utils.*)",
                """
                py:module botorch.models
                py:module botorch.models.gp_regression
                py:class botorch.models.gp_regression.SingleTaskGP botorch.models.SingleTaskGP
                py:class botorch.models.multitask.MultiTaskGP botorch.models.MultiTaskGP
                py:class botorch.models.model.Model
                py:class botorch.models.gpytorch.GPyTorchModel
                py:class botorch.models.gpytorch.BatchedMultiOutputGPyTorchModel
                py:class botorch.models.transforms.input.InputTransform
                py:class botorch.models.transforms.input.Normalize
                py:class botorch.models.transforms.outcome.OutcomeTransform
                py:class botorch.models.transforms.outcome.Standardize
                py:function botorch.models.utils.gpytorch_modules.get_covar_module_with_dim_scaled_prior
            """,
            ),
            (
                "sampling.html",
                "sampling.rst: .. automodule:: botorch.sampling.pathwise.* :members:",
                """
                py:module botorch.sampling.pathwise.features.maps
                py:module botorch.sampling.pathwise.features.generators
                py:module botorch.sampling.pathwise.paths
                py:module botorch.sampling.pathwise.prior_samplers
                py:module botorch.sampling.pathwise.posterior_samplers
                py:module botorch.sampling.pathwise.update_strategies
                py:class botorch.sampling.pathwise.features.maps.FeatureMap botorch.sampling.pathwise.features.FeatureMap
                py:class botorch.sampling.pathwise.features.maps.KernelFeatureMap botorch.sampling.pathwise.features.KernelFeatureMap
                py:function botorch.sampling.pathwise.features.generators.gen_kernel_features
                py:class botorch.sampling.pathwise.paths.SamplePath
                py:class botorch.sampling.pathwise.paths.GeneralizedLinearPath
                py:function botorch.sampling.pathwise.prior_samplers.draw_kernel_feature_paths
                py:class botorch.sampling.pathwise.posterior_samplers.MatheronPath
                py:function botorch.sampling.pathwise.posterior_samplers.draw_matheron_paths botorch.sampling.pathwise.draw_matheron_paths
                py:function botorch.sampling.pathwise.update_strategies.gaussian_update
            """,
            ),
            (
                "acquisition.html",
                "acquisition.rst: .. automodule:: botorch.acquisition.logei, .thompson_sampling :members:",
                """
                py:class botorch.acquisition.logei.qLogExpectedImprovement
                py:class botorch.acquisition.logei.qLogNoisyExpectedImprovement
                py:class botorch.acquisition.thompson_sampling.PathwiseThompsonSampling
            """,
            ),
            ("fit.html", "fit.rst: .. automodule:: botorch.fit :members:", "py:function botorch.fit.fit_gpytorch_mll"),
            (
                "optim.html",
                "optim.rst: .. automodule:: botorch.optim.optimize :members:",
                """
                py:function botorch.optim.optimize.optimize_acqf botorch.optim.optimize_acqf
            """,
            ),
            (
                "posteriors.html",
                "posteriors.rst: .. automodule:: botorch.posteriors.gpytorch :members:",
                """
                py:class botorch.posteriors.gpytorch.GPyTorchPosterior
            """,
            ),
            (
                "exceptions.html",
                "exceptions.rst: .. automodule:: botorch.exceptions.warnings :members:",
                """
                py:exception botorch.exceptions.warnings.InputDataWarning botorch.exceptions.InputDataWarning
            """,
            ),
            (
                "test_functions.html",
                "test_functions.rst: .. automodule:: botorch.test_functions.synthetic :members:",
                """
                py:class botorch.test_functions.synthetic.Hartmann
                py:class botorch.test_functions.synthetic.StyblinskiTang
            """,
            ),
        ],
    ),
}


def inventory_lines(pages: list[tuple[str, str, str]]) -> list[str]:
    """``name domain:role priority uri dispname`` for every entry and alias (aliases: priority -1, as Sphinx)."""
    lines = []
    for page, _source, entries in pages:
        for entry in entries.strip().splitlines():
            role, name, *aliases = entry.split()
            uri = page.format(name=name) + ("#module-" if role == "py:module" else "#") + name
            lines.append(f"{name} {role} {0 if role == 'py:module' else 1} {uri} -")
            lines.extend(f"{alias} {role} -1 {uri} -" for alias in aliases)
    return sorted(lines)


def write(project: str, lines: list[str]) -> Path:
    header = f"# Sphinx inventory version 2\n# Project: {project}\n# Version: \n"
    header += "# The remainder of this file is compressed using zlib.\n"
    path = HERE / f"{project}.inv"
    # Sorted lines, no timestamp or version: the same table gives the same bytes (with the same zlib).
    path.write_bytes(header.encode() + zlib.compress("".join(line + "\n" for line in lines).encode(), 9))
    return path


def check(lines: list[str]) -> None:
    """Import every name and alias of an installed package and check that the aliases are the same object."""

    def resolve(dotted: str) -> object:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for part in parts[i:]:
                obj = getattr(obj, part)
            return obj
        raise ImportError(dotted)

    targets: dict[str, object] = {}
    for line in lines:
        name, _role, _priority, uri, _dispname = line.split()
        obj = resolve(name)
        if targets.setdefault(uri, obj) is not obj:
            raise SystemExit(f"{name} is not the object documented at {uri}")


def main() -> None:
    for project, (_base, pages) in TABLE.items():
        lines = inventory_lines(pages)
        if "--check" in sys.argv[1:]:
            check(lines)
        print(f"{write(project, lines).relative_to(HERE.parent.parent)}: {len(lines)} entries")


if __name__ == "__main__":
    main()
