"""The test suite mirrors the source tree: the tests of ``gprf/<package>/<module>.py`` live in
``tests/<package>/test_<module>.py`` (``tests/test_<module>.py`` for top-level modules; a private module's leading
underscore is dropped, e.g. ``gprf/_checks.py`` -> ``tests/test_checks.py``), and every test module has its source
module. Package ``__init__.py`` files only re-export and ``gprf/__main__.py`` is covered by ``tests/cli/test_main.py``.

This checks the repository's layout, not a module of gprf.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXEMPT = {"__init__.py", "__main__.py"}
#: Source trees and the test folders that mirror them: the repository's benchmarks (not part of the package) are
#: tested in ``tests/benchmarks/test_<module>.py``; ``benchmarks/__main__.py`` is covered by
#: ``tests/benchmarks/test_bench.py``.
SOURCE_TREES = {ROOT / "gprf": ROOT / "tests", ROOT / "benchmarks": ROOT / "tests" / "benchmarks"}
#: Tests of the repository rather than of a module: this file, and what the built package holds.
REPOSITORY_TESTS = {ROOT / "tests" / "test_layout.py", ROOT / "tests" / "test_packaging.py"}


def _expected_test_files() -> dict[Path, Path]:
    """``{test file: source module}`` for every module of gprf and of the benchmarks that needs tests."""
    expected = {}
    for tree, tests in SOURCE_TREES.items():
        for source in sorted(tree.rglob("*.py")):
            if source.name in EXEMPT:
                continue
            package = source.parent.relative_to(tree)
            expected[tests / package / f"test_{source.stem.lstrip('_')}.py"] = source
    return expected


def test_every_module_has_its_test_file():
    missing = [str(test.relative_to(ROOT)) for test in _expected_test_files() if not test.is_file()]
    assert not missing, f"modules without their mirrored test file: {missing}"


def test_every_test_file_mirrors_a_module():
    expected = set(_expected_test_files()) | REPOSITORY_TESTS
    stray = [
        str(path.relative_to(ROOT)) for path in sorted((ROOT / "tests").rglob("test_*.py")) if path not in expected
    ]
    assert not stray, f"test files without a source module (move their tests to the module's test file): {stray}"
