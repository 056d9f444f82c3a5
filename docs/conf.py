"""Sphinx configuration of the gprf documentation.

Build (warnings are errors, as in CI)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
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
nitpicky = False

# -- Intersphinx ---------------------------------------------------------------------------------------
# Links to the documentation of Python, PyTorch, GPyTorch, linear_operator and BoTorch. The build never goes
# online: each project's only inventory is the small file committed in docs/_intersphinx/, written by
# docs/_intersphinx/make_inventories.py, whose TABLE holds the base URLs used here and records where every
# URL pattern comes from (add an entry there and rerun it when the docs reference a new object).
sys.path.insert(0, os.path.abspath("_intersphinx"))
from make_inventories import TABLE  # noqa: E402

intersphinx_mapping = {project: (url, (f"_intersphinx/{project}.inv",)) for project, (url, _pages) in TABLE.items()}

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
