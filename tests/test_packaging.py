"""What the built package holds and what importing it costs: the wheel carries the licence, the typing marker and the
bundled dataset but not the repository's benchmarks, declares the ``gprf`` console script, and needs neither
scikit-learn nor matplotlib (``import gprf`` and the main job import neither); ``import gprf`` leaves out the test kit
and pytest.

The wheel is built offline from a copy of the package's sources with the installed setuptools
(``pip wheel --no-deps --no-build-isolation --no-index``), so the repository itself gets no build folders.
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gprf import __version__
from gprf.cli.main import console_script

ROOT = Path(__file__).resolve().parent.parent
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "gprf", "benchmarks")
OPTIONAL = ("sklearn", "matplotlib")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source")
    for name in WHEEL_SOURCES:  # benchmarks/ sits beside gprf/ as in the repository: the build must leave it out
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, source / name)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "--no-index"]
    result = subprocess.run([*command, "-w", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("gprf-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    return wheel.read(f"gprf-{__version__}.dist-info/{name}").decode()


def test_the_wheel_holds_the_licence_and_the_typing_marker_but_no_benchmarks(wheel):
    names = wheel.namelist()
    assert "gprf/py.typed" in names and "gprf/cli/diabetes.csv" in names
    licence = _dist_info(wheel, "licenses/LICENSE")
    assert licence.startswith("MIT License") and "Copyright (c) 2026 The gprf developers" in licence
    assert (ROOT / "LICENSE").read_text() == licence
    assert not [name for name in names if name.split("/")[0] in ("benchmarks", "tests", "examples")]
    assert "gprf/__init__.py" in names and "gprf/cli/compare.py" in names


def test_the_wheel_requires_neither_scikit_learn_nor_matplotlib(wheel):
    metadata = email.message_from_string(_dist_info(wheel, "METADATA"))
    assert metadata["License-Expression"] == "MIT"
    required = [req for req in metadata.get_all("Requires-Dist") if "extra ==" not in req]
    assert required and not [req for req in required if req.startswith(("scikit-learn", "matplotlib"))]
    for name, bound in (("gpytorch", "<1.16"), ("linear_operator", "<0.7")):
        assert any(req.startswith(name) and bound in req for req in required), required
    bench = [req for req in metadata.get_all("Requires-Dist") if 'extra == "bench"' in req]
    assert any(req.startswith("scikit-learn") for req in bench) and any(req.startswith("matplotlib") for req in bench)


def test_the_wheel_declares_the_gprf_console_script(wheel):
    entry_points = _dist_info(wheel, "entry_points.txt").splitlines()
    assert entry_points[entry_points.index("[console_scripts]") + 1] == "gprf = gprf.cli.main:console_script"
    assert callable(console_script)


def test_import_gprf_and_compare_need_neither_scikit_learn_nor_matplotlib():
    """In a fresh interpreter: ``import gprf`` loads neither library, and neither does a small run of
    ``python -m gprf compare`` on the bundled dataset."""
    script = (
        "import sys\n"
        "import gprf\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r}))\n"
        "from gprf.cli import main\n"
        "code = main(['compare', '--subsample', '60', '--max-train', '80', '--fit-iters', '2', '--features', '8',"
        " '--methods', 'rff', '--quiet'])\n"
        f"print(code, sorted(m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "[]"
    assert "gprf compare: diabetes (Efron et al. 2004, bundled), 442 rows x 10 inputs" in result.stdout
    assert lines[-1] == "0 []"


def test_import_gprf_leaves_out_the_test_kit_and_pytest():
    """The kit (gprf.testing) needs pytest; importing gprf loads neither."""
    script = (
        "import sys\n"
        "import gprf\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pytest' or m.startswith('gprf.testing')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
