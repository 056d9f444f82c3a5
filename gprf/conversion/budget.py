r"""The budget rule of :func:`gprf.random_features`: how ``num_features`` is split across a kernel expression.

Every part of the expression (a node of the GPyTorch module tree, named by its dotted path such as
``"kernels.0.base_kernel"``; the root is ``""``) receives a number of features :math:`F`:

* the root receives ``num_features``;
* ``ScaleKernel`` passes its :math:`F` to its base kernel;
* a sum (``AdditiveKernel``) first pays its *exact* parts (``LinearKernel``: :math:`d` columns, ``IndexKernel``:
  rank + tasks; parts built only of exact kernels) their exact width, then splits the rest evenly over its random
  parts (the remainder one feature each to the first parts). Parts given a number in a ``budget`` dict keep it and
  the others split what is left;
* a product (``ProductKernel``) gives each random factor the product's :math:`F` and forms :math:`F` product
  features from them (:class:`~gprf.kernels.FeatureProductKernel`; with at most one random factor, the exact
  Kronecker product with the exact factors);
* ``AdditiveStructureKernel`` gives each of its :math:`d` one-dimensional components :math:`F/d` features;
* leaves round down to what their map needs (an even number for random Fourier features).

A part left with fewer features than it needs (fewer than parts in a sum, fewer than two per Fourier component)
raises a ``ValueError`` naming ``num_features``.

Overrides (``budget=``): a dict ``{path: F}`` fixes the features of those parts (a sum's other parts share the
rest), or a callable ``budget(path, kernel, proposed) -> int`` is asked at every part with the number the rule
proposes and its answer is used (no redistribution among siblings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gpytorch.kernels import Kernel

#: The ``budget`` argument of :func:`gprf.random_features`: ``None`` (the rule alone), a dict ``{path: F}`` of
#: per-part overrides (paths as in ``kernel.named_modules()``), or a callable ``budget(path, kernel, proposed)``
#: returning the part's number of features.
BudgetOverride = Mapping[str, int] | Callable[[str, Kernel, int], int] | None


def check_features(value: object, where: str) -> int:
    """A positive integer number of features, else a ``ValueError`` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: the number of features must be a positive integer, got {value!r}.")
    return value


def split_evenly(total: int, num_parts: int, where: str) -> list[int]:
    """``total`` features over ``num_parts`` parts, as evenly as possible (the first parts get the remainder)."""
    if num_parts == 0:
        return []
    if total < num_parts:
        raise ValueError(
            f"num_features is too small: {total} feature(s) left for the {num_parts} random parts of the sum at "
            f"{where} (each needs at least one, random Fourier parts two); raise num_features or give parts "
            "fewer features through budget=."
        )
    base, remainder = divmod(total, num_parts)
    return [base + (index < remainder) for index in range(num_parts)]


class Budget:
    """Resolves the features of each part: the rule above, then the user's overrides."""

    def __init__(self, override: BudgetOverride) -> None:
        if override is not None and not (isinstance(override, Mapping) or callable(override)):
            raise TypeError(
                f"budget must be a dict {{path: num_features}}, a callable (path, kernel, proposed) -> int or None, "
                f"got {type(override).__name__}."
            )
        self.override = override
        self.used: set[str] = set()

    def fixed(self, path: str) -> int | None:
        """The number a ``budget`` dict fixes for ``path`` (``None``: not fixed, or a callable budget)."""
        if isinstance(self.override, Mapping) and path in self.override:
            self.used.add(path)
            return check_features(self.override[path], f"budget[{path!r}]")
        return None

    def resolve(self, path: str, kernel: Kernel, proposed: int) -> int:
        """The features of the part at ``path``: a dict's number, the callable's answer, else ``proposed``."""
        fixed = self.fixed(path)
        if fixed is not None:
            return fixed
        if callable(self.override) and not isinstance(self.override, Mapping):
            return check_features(self.override(path, kernel, proposed), f"budget({path!r}, ...)")
        return proposed

    def split_sum(self, total: int, paths: Sequence[str], where: str) -> list[int]:
        """Features of a sum's random parts at ``paths``: fixed parts keep theirs, the rest split what is left."""
        fixed = {path: self.fixed(path) for path in paths}
        free = [path for path in paths if fixed[path] is None]
        left = total - sum(value for value in fixed.values() if value is not None)
        shares = iter(split_evenly(left, len(free), where))
        return [fixed[path] if fixed[path] is not None else next(shares) for path in paths]

    def check_all_used(self, known_paths: Sequence[str]) -> None:
        """A ``budget`` dict naming a path that is not a part of the expression is a mistake: say which."""
        if isinstance(self.override, Mapping):
            unknown = sorted(set(self.override) - self.used)
            if unknown:
                raise ValueError(
                    f"budget names parts that are not random parts of the kernel expression: {unknown}; valid paths "
                    f"are {sorted(known_paths)} (the dotted names of kernel.named_modules())."
                )
