"""gprf._botorch_hook: importing gprf changes nothing in GPyTorch, linear_operator or BoTorch, never imports BoTorch,
and still hands BoTorch gprf's kernels whichever package the user imports first, by whichever import statement, also
after reloading gprf and with threads importing BoTorch at once (fresh interpreters: imports are process-wide); the
import watcher behind it calls back once, after a successful import only, and turns a failing callback into a warning
instead of a failed import (on toy packages)."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import textwrap

import pytest

from gprf._botorch_hook import ImportWatcher
from gprf.exceptions import GPRFWarning

pytest.importorskip("botorch")


def _run(script: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_import_gprf_leaves_other_libraries_alone():
    output = _run(
        """
        import sys
        import gpytorch, linear_operator.settings as s
        before = (gpytorch.distributions.MultivariateNormal.log_prob, s._fast_log_prob._default,
                  s._fast_solves._default, s._fast_covar_root_decomposition._default)
        import gprf, gprf.kernels, gprf.prediction, gprf.streaming, gprf.likelihoods
        after = (gpytorch.distributions.MultivariateNormal.log_prob, s._fast_log_prob._default,
                 s._fast_solves._default, s._fast_covar_root_decomposition._default)
        print(all(a is b for a, b in zip(before, after)), "botorch" in sys.modules)
        """
    )
    assert output.split() == ["True", "False"]


_PATHS = """
    import torch
    from gpytorch.kernels import ScaleKernel
    from botorch.models import SingleTaskGP
    from botorch.sampling.pathwise import draw_matheron_paths
    from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
    x = torch.rand(20, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = SingleTaskGP(x, torch.sin(4 * x).sum(-1, keepdim=True),
                         covar_module=ScaleKernel(RandomFourierKernel(32, num_dims=2, seed=0))).eval()
    paths = draw_matheron_paths(model, torch.Size([4]))
    print(type(paths.paths["prior_paths"].feature_map).__name__, type(paths.paths["update_paths"].feature_map).__name__)
    print(tuple(PathwiseThompsonSampling(model)(x[:3].unsqueeze(1)).shape))
"""


def test_botorch_finds_gprf_kernels_after_import_gprf_when_botorch_came_first():
    output = _run(
        "import botorch\nimport gprf\nfrom gprf.kernels import RandomFourierKernel\n" + textwrap.dedent(_PATHS)
    )
    assert output.split() == ["KernelRootFeatureMap", "KernelRootFeatureMap", "(3,)"]


def test_botorch_finds_gprf_kernels_when_gprf_came_first():
    output = _run(
        "import gprf\nfrom gprf.kernels import RandomFourierKernel\nimport botorch\n" + textwrap.dedent(_PATHS)
    )
    assert output.split() == ["KernelRootFeatureMap", "KernelRootFeatureMap", "(3,)"]


@pytest.mark.parametrize(
    "first_import", ["from botorch.models import SingleTaskGP", "import botorch.sampling.pathwise", "import botorch"]
)
def test_botorch_finds_gprf_kernels_whichever_botorch_import_comes_first(first_import):
    script = f"""
        import sys
        import gprf
        from gprf.kernels import RandomFourierKernel
        assert "botorch" not in sys.modules and "gprf.botorch" not in sys.modules
        {first_import}
        import botorch
        # Registered once BoTorch was executed; the watcher is gone and BoTorch's loader is as it was.
        assert "gprf.botorch" in sys.modules
        assert not any(type(finder).__name__ == "ImportWatcher" for finder in sys.meta_path)
        assert "exec_module" not in vars(botorch.__loader__) and botorch.__spec__.loader is botorch.__loader__
    """
    output = _run(textwrap.dedent(script) + textwrap.dedent(_PATHS))
    assert output.split() == ["KernelRootFeatureMap", "KernelRootFeatureMap", "(3,)"]


def test_reloading_gprf_keeps_one_watcher_and_the_registration():
    output = _run(
        """
        import importlib, sys
        import gprf
        importlib.reload(gprf)
        importlib.reload(gprf)
        watchers = sum(type(finder).__name__ == "ImportWatcher" for finder in sys.meta_path)
        import botorch
        registered = "gprf.botorch" in sys.modules
        importlib.reload(gprf)  # BoTorch imported: nothing left to watch
        left = sum(type(finder).__name__ == "ImportWatcher" for finder in sys.meta_path)
        from botorch.sampling.pathwise.features import gen_kernel_features
        from gprf.kernels import RandomFourierKernel
        feature_map = gen_kernel_features(RandomFourierKernel(8, num_dims=2, seed=0), num_inputs=2, num_outputs=8)
        print(watchers, registered, left, type(feature_map).__name__)
        """
    )
    assert output.split() == ["1", "True", "0", "KernelRootFeatureMap"]


def test_threads_importing_botorch_at_once_all_get_gprfs_entries():
    output = _run(
        """
        import sys, threading
        import gprf
        barrier = threading.Barrier(6)
        errors = []
        def work():
            try:
                barrier.wait()
                from botorch.sampling.pathwise.features import gen_kernel_features
                from gprf.kernels import RandomFourierKernel
                kernel = RandomFourierKernel(8, num_dims=2, seed=0)
                errors.append(type(gen_kernel_features(kernel, num_inputs=2, num_outputs=8)).__name__)
            except Exception as error:
                errors.append(repr(error))
        threads = [threading.Thread(target=work) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(sorted(set(errors)), sum(type(finder).__name__ == "ImportWatcher" for finder in sys.meta_path))
        """
    )
    assert output.split() == ["['KernelRootFeatureMap']", "0"]


# The watcher on toy packages, in this process: the package's code reads an attribute of the test module.
_TOY_PACKAGE = """
import sys
if sys.modules["{tests}"].TOY_FAILS:
    raise RuntimeError("toy package failed")
VALUE = 42
"""
TOY_FAILS = False


@pytest.fixture
def toy_package(tmp_path, monkeypatch, request):
    name = f"gprf_toy_{request.node.name.replace('[', '_').replace(']', '_')}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(_TOY_PACKAGE.format(tests=__name__))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    for finder in [finder for finder in sys.meta_path if isinstance(finder, ImportWatcher) and finder.name == name]:
        finder.uninstall()


def test_the_watcher_calls_back_once_after_a_successful_import_only(toy_package, monkeypatch):
    calls = []
    ImportWatcher.install(toy_package, lambda: calls.append(sys.modules[toy_package].VALUE))
    ImportWatcher.install(toy_package, lambda: calls.append("second"))  # one watcher per name
    assert importlib.util.find_spec(toy_package) is not None and calls == []  # finding is not importing
    monkeypatch.setattr(sys.modules[__name__], "TOY_FAILS", True)
    with pytest.raises(RuntimeError, match="toy package failed"):
        importlib.import_module(toy_package)
    assert calls == [] and toy_package not in sys.modules  # the failed import fails as it would have, watcher kept
    monkeypatch.setattr(sys.modules[__name__], "TOY_FAILS", False)
    module = importlib.import_module(toy_package)
    assert calls == [42]  # after the package's code ran
    assert not any(isinstance(finder, ImportWatcher) and finder.name == toy_package for finder in sys.meta_path)
    assert "exec_module" not in vars(module.__loader__)
    importlib.reload(module)
    assert calls == [42]


def test_a_failing_callback_is_a_warning_not_a_failed_import(toy_package):
    def fail() -> None:
        raise ImportError("no integration")

    ImportWatcher.install(toy_package, fail)
    with pytest.warns(GPRFWarning, match=rf"{toy_package} was imported, but .*ImportError: no integration"):
        module = importlib.import_module(toy_package)
    assert module.VALUE == 42 and sys.modules[toy_package] is module
