"""Connect gprf to BoTorch as soon as both are imported, in either order, without ever importing BoTorch.

BoTorch switches linear_operator's fast computations off when it is imported, so ``import gprf`` must not import
it; and BoTorch's pathwise samplers find gprf's kernels only once :mod:`gprf.botorch` has added its entries to BoTorch's
dispatchers. So ``import gprf`` (:func:`connect_botorch`) imports :mod:`gprf.botorch` at once when BoTorch is already
imported, and otherwise puts an :class:`ImportWatcher` on ``sys.meta_path`` that imports it right after the package
``botorch`` has been executed — whichever import statement brought BoTorch in (``import botorch``,
``from botorch.models import SingleTaskGP``, ...), since Python executes a package before any of its submodules.

Python has no public post-import hook, and BoTorch no plugin entry point, so the watcher is a meta path finder that
finds nothing itself: it asks the finders after it for the spec, as the import would have, wraps that spec's loader's
``exec_module`` for this one import, and removes itself (and the wrapper) once the package has been executed. The
module BoTorch gets is the one it would have got; no object of BoTorch, GPyTorch or linear_operator is changed.
"""

from __future__ import annotations

import importlib
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

from gprf.exceptions import GPRFWarning


class ImportWatcher(MetaPathFinder):
    """Calls ``callback()`` once, right after the module ``name`` has been executed by its first successful import.

    A meta path finder that finds nothing itself: for ``name`` it returns the spec the finders after it return,
    with that spec's loader's ``exec_module`` wrapped for this import. When the module's code raises, the import fails
    as it would have and the watcher waits for the next one; once it has succeeded, the watcher leaves
    ``sys.meta_path`` and the loader is as it was, then ``callback`` runs. An error of ``callback`` is a
    :class:`~gprf.exceptions.GPRFWarning`, never a failed import of ``name``.
    """

    _lock = threading.Lock()

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callback = callback

    @classmethod
    def install(cls, name: str, callback: Callable[[], None]) -> None:
        """Put a watcher for ``name`` first on ``sys.meta_path``, unless one is there already (``importlib.reload``
        of the package that installs it)."""
        with cls._lock:
            if not any(isinstance(finder, cls) and finder.name == name for finder in sys.meta_path):
                sys.meta_path.insert(0, cls(name, callback))

    def uninstall(self) -> None:
        with self._lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        spec = self._spec_of_other_finders(fullname, path, target)
        # Loaders without exec_module (or whose method cannot be wrapped) load unwatched, as without gprf.
        if spec is None or not hasattr(spec.loader, "exec_module") or not hasattr(spec.loader, "__dict__"):
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            del loader.exec_module  # the loader is as it was
            self.uninstall()
            self._run_callback()

        loader.exec_module = exec_module
        return spec

    def _spec_of_other_finders(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _run_callback(self) -> None:
        try:
            self.callback()
        except Exception as error:  # the watched import must not fail for gprf
            warnings.warn(
                f"{self.name} was imported, but gprf's integration with it could not be loaded "
                f"({type(error).__name__}: {error}); import gprf.botorch to see the whole error.",
                GPRFWarning,
                stacklevel=2,
            )


def import_gprf_botorch() -> None:
    importlib.import_module("gprf.botorch")


def connect_botorch() -> None:
    """Import :mod:`gprf.botorch` (its entries in BoTorch's dispatchers) now if BoTorch is imported, otherwise right
    after BoTorch's import (module docstring); never import BoTorch."""
    if sys.modules.get("botorch") is not None:
        import_gprf_botorch()
    else:
        ImportWatcher.install("botorch", import_gprf_botorch)
