"""The documentation's API reference and its build settings (repository content, not a module of gprf).

* Every public module of gprf (each top-level module and subpackage without a leading underscore) has its API page,
  ``docs/api/<name>.rst``, which documents it with ``automodule`` and is in the API index's table of contents; the
  index documents ``gprf`` itself. The command-line package ``gprf.cli`` is documented as the ``python -m gprf``
  command instead (its modules are not an API).
* The build is nitpicky (every cross-reference must resolve), and ``nitpick_ignore`` only lists other projects'
  names: an unresolved gprf reference is fixed, never ignored.

``docs/conf.py`` is read as source, so these checks need neither Sphinx nor a build.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"
#: Public modules without an API page, and why.
NOT_AN_API = {"cli": "the command-line interface, documented as the `python -m gprf` command"}


def public_modules() -> list[str]:
    """The top-level modules and subpackages of gprf a user imports, by name."""
    package = ROOT / "gprf"
    names = [path.stem for path in package.glob("*.py")]
    names += [path.parent.name for path in package.glob("*/__init__.py")]
    return sorted(name for name in names if not name.startswith("_") and name not in NOT_AN_API)


def toctree_entries(page: Path) -> list[str]:
    """The documents listed by the ``toctree`` directives of ``page``."""
    entries, in_toctree = [], False
    for line in page.read_text().splitlines():
        if line.startswith(".. toctree::"):
            in_toctree = True
        elif in_toctree and line and not line.startswith(" "):
            in_toctree = False
        elif in_toctree and line.strip() and not line.strip().startswith(":"):
            entries.append(line.strip())
    return entries


def conf_assignments() -> dict[str, object]:
    """The literal values assigned at the top level of ``docs/conf.py``."""
    values = {}
    for node in ast.parse((ROOT / "docs" / "conf.py").read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue  # computed values (paths, the intersphinx mapping)
    return values


def test_public_modules_are_found():
    # The discovery itself: a sample of modules and subpackages the package is known to have, and no private one.
    modules = public_modules()
    assert {"kernels", "streaming", "settings", "testing", "botorch"} <= set(modules)
    assert not any(name.startswith("_") for name in modules)
    assert "cli" not in modules


def test_every_public_module_has_an_api_page():
    missing = [name for name in public_modules() if not (API / f"{name}.rst").is_file()]
    assert not missing, f"public modules without docs/api/<name>.rst: {missing}"


def test_every_api_page_documents_its_module():
    undocumented = [
        name
        for name in public_modules()
        if (API / f"{name}.rst").is_file()
        and not re.search(rf"^\.\. automodule:: gprf\.{name}$", (API / f"{name}.rst").read_text(), re.MULTILINE)
    ]
    assert not undocumented, f"API pages without '.. automodule:: gprf.<name>': {undocumented}"


def test_every_api_page_is_in_the_api_index():
    index = API / "index.rst"
    assert re.search(r"^\.\. automodule:: gprf$", index.read_text(), re.MULTILINE)
    entries = toctree_entries(index)
    assert not [name for name in public_modules() if name not in entries]
    stray = [entry for entry in entries if not (API / f"{entry}.rst").is_file()]
    assert not stray, f"API index entries without a page: {stray}"


def gprf_definitions() -> set[str]:
    """The names that gprf's modules define at their top level (classes, functions, variables; not imports)."""
    names = set()
    for path in (ROOT / "gprf").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name))
    return names


def test_build_is_nitpicky_and_ignores_no_gprf_name():
    values = conf_assignments()
    assert values["nitpicky"] is True
    ignored = values["nitpick_ignore"]
    assert ignored, "nitpick_ignore should list the undocumented objects of other projects"
    defined = gprf_definitions()
    assert {"FeatureKernel", "fit_mll", "SPECTRA"} <= defined
    gprf_names = [
        (role, name) for role, name in ignored if name.split(".")[0] == "gprf" or name.rsplit(".", 1)[-1] in defined
    ]
    assert not gprf_names, f"gprf names must resolve, not be ignored: {gprf_names}"
