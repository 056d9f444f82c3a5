"""What a contract test must cover: the concrete classes a gprf module exports."""

from __future__ import annotations

from types import ModuleType


def is_abstract(cls: type) -> bool:
    """Whether ``cls`` leaves an abstract method unimplemented.

    ``inspect.isabstract`` only sees classes built by ``ABCMeta``; GPyTorch's ``Kernel`` is not, so gprf's kernel
    bases mark their abstract methods without Python enforcing them.
    """
    return any(getattr(getattr(cls, name, None), "__isabstractmethod__", False) for name in dir(cls))


def concrete_exported_classes(module: ModuleType, bases: tuple[type, ...]) -> list[type]:
    """The concrete subclasses of ``bases`` that ``module`` exports in ``__all__``, sorted by name.

    Raises ``AssertionError`` when a concrete subclass defined in gprf is not exported: a contract that enumerates the
    exports must not miss it.
    """
    exported = [getattr(module, name) for name in module.__all__]
    concrete = {cls for cls in exported if isinstance(cls, type) and issubclass(cls, bases) and not is_abstract(cls)}
    defined, pending = set(), list(bases)
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass not in defined and subclass.__module__.startswith("gprf."):
                defined.add(subclass)
                pending.append(subclass)
    hidden = {cls.__name__ for cls in defined if not is_abstract(cls)} - {cls.__name__ for cls in concrete}
    assert not hidden, f"concrete classes not exported from {module.__name__}: {sorted(hidden)}"
    return sorted(concrete, key=lambda cls: cls.__name__)
