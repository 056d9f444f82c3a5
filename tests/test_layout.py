"""The repository's layout, not a module of gprf.

* The test suite mirrors the source tree: the tests of ``gprf/<package>/<module>.py`` live in
  ``tests/<package>/test_<module>.py`` (``tests/test_<module>.py`` for top-level modules; a private module's leading
  underscore is dropped, e.g. ``gprf/_checks.py`` -> ``tests/test_checks.py``), and every test module has its source
  module. Package ``__init__.py`` files only re-export and ``gprf/__main__.py`` is covered by
  ``tests/cli/test_main.py``. The adversarial suite, ``tests/adversarial/``, is mirrored by public entry point
  instead (``test_<entry point>.py``: kernels, fit_mll, streaming, ...) and is not part of this check.
* The modules of gprf import one another without a circle: every ``import`` and ``from ... import`` statement counts,
  wherever it stands (module level, functions, classes), and so do ``importlib.import_module`` calls.
* Every line of ``tests/slow_tests.txt`` (the tests ``-m "not slow"`` leaves out) still names a collected test, and the
  tests marked ``slow`` are exactly those it names.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

from tests.conftest import SLOW_TESTS_FILE, is_listed, read_slow_tests

ROOT = Path(__file__).resolve().parent.parent
EXEMPT = {"__init__.py", "__main__.py"}
#: Source trees and the test folders that mirror them: the repository's benchmarks (not part of the package) are
#: tested in ``tests/benchmarks/test_<module>.py``; ``benchmarks/__main__.py`` is covered by
#: ``tests/benchmarks/test_bench.py``.
SOURCE_TREES = {ROOT / "gprf": ROOT / "tests", ROOT / "benchmarks": ROOT / "tests" / "benchmarks"}
#: Tests of the repository rather than of a module: this file, what the built package holds, the example scripts and
#: the documentation's API pages.
REPOSITORY_TESTS = {
    ROOT / "tests" / name for name in ("test_layout.py", "test_packaging.py", "test_examples.py", "test_docs.py")
}
#: The adversarial suite: one file per public entry point, across modules.
ADVERSARIAL = ROOT / "tests" / "adversarial"


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
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if path not in expected and ADVERSARIAL not in path.parents
    ]
    assert not stray, f"test files without a source module (move their tests to the module's test file): {stray}"


# ---------------------------------------------------------------------------------------------------- import graph
def _module_files(package_dir: Path) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package in ``package_dir`` (a package by its ``__init__``)."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _absolute(name: str, level: int, package: str) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in a module of ``package``."""
    if level == 0:
        return name
    anchor = package.split(".")
    anchor = anchor[: len(anchor) - (level - 1)]
    return ".".join(anchor + ([name] if name else []))


def _dynamic_import_name(call: ast.Call, package: str) -> str | None:
    """What an ``importlib.import_module(...)`` (or ``__import__(...)``) call imports; ``None`` for other calls.

    Raises ``AssertionError`` for a name the scan cannot read (not a string literal): the scan would be incomplete.
    """
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in ("import_module", "__import__"):
        return None
    argument = call.args[0] if call.args else None
    if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
        raise AssertionError(f"line {call.lineno}: {called} of a name that is not a string literal cannot be scanned")
    name = argument.value
    level = len(name) - len(name.lstrip("."))
    return _absolute(name[level:], level, package)


def _imports(path: Path, module: str) -> list[tuple[str, str, int]]:
    """``(name, fallback, line)`` for everything ``module`` imports: ``name`` is what the statement names (the
    submodule of ``from package import submodule``), ``fallback`` the module to count when ``name`` is no module
    (``from module import function``)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            found.extend((f"{base}.{alias.name}", base, node.lineno) for alias in node.names)
        elif isinstance(node, ast.Call):
            name = _dynamic_import_name(node, package)
            if name is not None:
                found.append((name, name, node.lineno))
    return found


def _known_module(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of the dotted ``name`` that is a module of ``modules`` (``None``: an outside import)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            return prefix
    return None


def import_graph(package_dir: Path) -> dict[str, dict[str, int]]:
    """``{module: {imported module of the package: line of the first such import}}`` for the package in
    ``package_dir``. A package's ``__init__`` counts only where it is named, not as the parent of a submodule (every
    module would otherwise import its package's re-exports)."""
    modules = _module_files(package_dir)
    graph: dict[str, dict[str, int]] = {module: {} for module in modules}
    for module, path in modules.items():
        for name, fallback, line in _imports(path, module):
            target = name if name in modules else _known_module(fallback, modules)
            if target is not None and target != module:
                graph[module].setdefault(target, line)
    return graph


def strongly_connected_components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The components of more than one module in which every module imports every other, directly or not (Tarjan)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(module: str) -> None:
        index[module] = lowlink[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                lowlink[module] = min(lowlink[module], lowlink[target])
            elif target in on_stack:
                lowlink[module] = min(lowlink[module], index[target])
        if lowlink[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(components)


def shortest_cycles(graph: dict[str, dict[str, int]], component: list[str]) -> list[list[str]]:
    """For each module of ``component``, the shortest import cycle through it (each cycle once, from its first
    module in sorted order)."""
    members = set(component)
    cycles = []
    for start in component:
        previous = {start: None}
        queue = deque([start])
        cycle = None
        while queue and cycle is None:
            module = queue.popleft()
            for target in sorted(graph[module]):
                if target == start:
                    cycle = [module]
                    while previous[cycle[-1]] is not None:
                        cycle.append(previous[cycle[-1]])
                    cycle.reverse()
                    break
                if target in members and target not in previous:
                    previous[target] = module
                    queue.append(target)
        first = cycle.index(min(cycle))
        cycle = cycle[first:] + cycle[:first]
        if cycle not in cycles:
            cycles.append(cycle)
    return cycles


def describe_cycles(graph: dict[str, dict[str, int]], package_dir: Path) -> str:
    """Each circle of ``graph``: its modules, and the shortest cycle through each, with the line of each import."""
    files = _module_files(package_dir)
    root = package_dir.parent
    lines = []
    for component in strongly_connected_components(graph):
        lines.append(f"circle of {len(component)} modules: {', '.join(component)}")
        for cycle in shortest_cycles(graph, component):
            steps = [
                f"{module} ({files[module].relative_to(root)}:{graph[module][target]})"
                for module, target in zip(cycle, cycle[1:] + cycle[:1], strict=True)
            ]
            lines.append("    " + " -> ".join(steps) + f" -> {cycle[0]}")
    return "\n".join(lines)


def test_gprf_imports_without_a_circle():
    package_dir = ROOT / "gprf"
    report = describe_cycles(import_graph(package_dir), package_dir)
    assert not report, f"import circles in gprf (each import with its line):\n{report}"


def test_settings_import_nothing_of_gprf():
    # The ground floor: every module may read the settings, so they may import no other module of gprf.
    assert import_graph(ROOT / "gprf")["gprf.settings"] == {}


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_import_scan_counts_function_level_relative_and_importlib_imports(tmp_path):
    package_dir = _write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import f\n",
            "pkg/a.py": "import os\n\n\ndef f():\n    from pkg import b\n    return b\n",
            "pkg/b.py": "import importlib\n\n\nclass B:\n    def g(self):\n"
            "        importlib.import_module('pkg.sub.c')\n",
            "pkg/sub/__init__.py": "from .c import h\n",
            "pkg/sub/c.py": "from ..a import f\n\n\ndef h():\n    return f\n",
            "pkg/d.py": "from pkg.sub import h\nimport pkg.a\n",
        },
    )
    graph = import_graph(package_dir)
    assert graph == {
        "pkg": {"pkg.a": 1},
        "pkg.a": {"pkg.b": 5},  # the submodule, not the package's __init__
        "pkg.b": {"pkg.sub.c": 6},
        "pkg.sub": {"pkg.sub.c": 1},
        "pkg.sub.c": {"pkg.a": 1},
        "pkg.d": {"pkg.sub": 1, "pkg.a": 2},
    }
    assert strongly_connected_components(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    report = describe_cycles(graph, package_dir)
    assert report.splitlines() == [
        "circle of 3 modules: pkg.a, pkg.b, pkg.sub.c",
        "    pkg.a (pkg/a.py:5) -> pkg.b (pkg/b.py:6) -> pkg.sub.c (pkg/sub/c.py:1) -> pkg.a",
    ]


def test_import_scan_refuses_imports_it_cannot_read(tmp_path):
    package_dir = _write_package(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/a.py": "import importlib\n\nNAME = 'pkg'\nimportlib.import_module(NAME)\n"},
    )
    with pytest.raises(AssertionError, match="line 4: import_module of a name that is not a string literal"):
        import_graph(package_dir)


def test_slow_list_names_collected_tests_and_marks_exactly_them():
    listed = read_slow_tests()
    modules = sorted({entry.split("::", 1)[0] for entry in listed})
    missing_modules = [module for module in modules if not (ROOT / module).is_file()]
    assert not missing_modules, f"{SLOW_TESTS_FILE.name} names modules that do not exist: {missing_modules}"
    # Collecting only the listed modules keeps this check to seconds; -m slow prints just the marked tests.
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "slow", *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    marked = [line for line in collected.stdout.splitlines() if "::" in line]
    stale = [entry for entry in listed if not any(is_listed(nodeid, entry) for nodeid in marked)]
    assert not stale, f"{SLOW_TESTS_FILE.name} lines that name no test (renamed or removed?): {stale}"
    unlisted = [nodeid for nodeid in marked if not any(is_listed(nodeid, entry) for entry in listed)]
    assert not unlisted, f"tests marked slow that {SLOW_TESTS_FILE.name} does not list: {unlisted}"


@pytest.mark.parametrize(
    ("nodeid", "listed", "expected"),
    [
        ("tests/a.py::test_f", "tests/a.py::test_f", True),
        ("tests/a.py::test_f[cpu-float32]", "tests/a.py::test_f", True),
        ("tests/a.py::TestK::test_f", "tests/a.py::TestK", True),
        ("tests/a.py::test_f", "tests/a.py", True),
        ("tests/a.py::test_f_and_more", "tests/a.py::test_f", False),
        ("tests/ab.py::test_f", "tests/a", False),
        ("tests/a.py::test_g", "tests/a.py::test_f", False),
    ],
)
def test_slow_list_lines_name_a_test_its_parametrizations_or_its_module(nodeid, listed, expected):
    assert is_listed(nodeid, listed) is expected


def test_slow_list_reading_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "slow_tests.txt"
    path.write_text("# how to regenerate\n\ntests/a.py::test_f  # 3 s\n  tests/b.py::TestK\n")
    assert read_slow_tests(path) == ["tests/a.py::test_f", "tests/b.py::TestK"]
