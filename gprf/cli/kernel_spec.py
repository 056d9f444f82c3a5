r"""Composite kernel specs of ``--kernel``: a short text for a GPyTorch kernel expression.

Grammar (``+`` binds looser than ``*``; parentheses group, at most :data:`MAX_NESTING` deep)::

    expression := term ("+" term)*
    term       := factor ("*" factor)*
    factor     := base [dims] | "additive(" stationary ")" [dims] | "(" expression ")"
    base       := "rbf" | "matern12" | "matern32" | "matern52" | "linear" | "poly" P
    dims       := "[" a ":" b "]" | "[" i ("," j)* "]"       (input columns, 0-based, a:b half-open)

Each stationary base gets an ARD lengthscale over its columns (``active_dims``); ``linear`` is GPyTorch's
``LinearKernel`` and ``polyP`` its ``PolynomialKernel(power=P)``; ``additive(k)`` is GPyTorch's
``AdditiveStructureKernel`` (a sum of one-dimensional ``k`` over the columns, one shared lengthscale). When the
expression has several terms, each term gets its own ``ScaleKernel`` (its amplitude); the model's outer
``ScaleKernel`` is the amplitude of a single term.

Example: ``"rbf[0:3]*matern52[3:6]+linear"`` is
``ScaleKernel(RBF(cols 0-2) * Matern52(cols 3-5)) + ScaleKernel(Linear(all cols))``.

The text is first read into a small syntax tree (:func:`read_kernel_spec`), which is then built into kernels for
the data's number of columns (:func:`build_kernel`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpytorch.kernels import AdditiveKernel, AdditiveStructureKernel, Kernel, ProductKernel, ScaleKernel

from gprf.kernels.exact import exact_target, stationary_targets

# The stationary bases are the stationary exact targets (gprf.kernels.exact.targets).
_STATIONARY = tuple(target.name for target in stationary_targets())
_BASES = (*_STATIONARY, "linear", "polyP (P = 1, 2, ...)", "additive(k)")
_TOKEN = re.compile(r"\s*(?:(?P<name>[a-z][a-z0-9]*)|(?P<int>\d+)|(?P<op>[-+*()\[\]:,]))")
#: What a token of each kind is called in the errors.
_KINDS = {"name": "a kernel name", "int": "a number"}
#: Deepest nesting of parentheses a spec may have (deeper ones are refused, not recursed into).
MAX_NESTING = 32
#: Most digits of a column number or polynomial degree (larger numbers are refused before conversion).
_MAX_DIGITS = 9


class KernelSpecError(ValueError):
    """A malformed ``--kernel`` spec: the message names the position and what was expected there.

    ``detail`` is the message without its ``--kernel '<spec>':`` prefix (for argparse, which names the option).
    """

    def __init__(self, text: str, detail: str) -> None:
        super().__init__(f"--kernel {_shorten(text)!r}: {detail}")
        self.detail = detail


def _shorten(text: str, keep_end: bool = False, width: int = 40) -> str:
    """``text`` cut to its first (or last) ``width`` characters, so an error about a long spec stays readable."""
    if len(text) <= width:
        return text
    return "..." + text[-width:] if keep_end else text[:width] + "..."


#: Columns of a base kernel: a half-open ``range`` (``[a:b]``), a tuple of indices (``[i, j]``) or ``None`` (all).
Columns = range | tuple[int, ...] | None


@dataclass(frozen=True)
class Base:
    """A base kernel (``rbf``, ``matern12/32/52``, ``linear`` or ``poly`` with its ``degree``) on ``columns``."""

    name: str
    columns: Columns = None
    degree: int | None = None


@dataclass(frozen=True)
class Additive:
    """``additive(base)``: a sum of one-dimensional stationary ``base`` kernels over ``columns``."""

    base: str
    columns: Columns = None


@dataclass(frozen=True)
class Sum:
    """A sum of at least two terms, each with its own amplitude."""

    terms: tuple[Spec, ...]


@dataclass(frozen=True)
class Product:
    """A product of at least two factors."""

    factors: tuple[Spec, ...]


Spec = Base | Additive | Sum | Product


def is_composite_spec(text: str) -> bool:
    """Whether ``--kernel`` names a composite expression rather than one of the single-kernel choices."""
    return any(char in text for char in "+*[(") or text == "linear" or text.startswith("poly")


def read_kernel_spec(text: str, num_dims: int | None = None) -> Spec:
    """The syntax tree of ``text``; columns are checked against ``0 .. num_dims - 1`` unless ``num_dims`` is None.

    Raises :class:`KernelSpecError` naming the position and what was expected for malformed text, unknown
    kernels, columns outside the data and parentheses nested deeper than :data:`MAX_NESTING`.
    """
    parser = _Parser(text, num_dims)
    spec = parser.expression(depth=0)
    parser.expect_end()
    return spec


def parse_kernel_spec(text: str, num_dims: int) -> Kernel:
    """The GPyTorch kernel expression of ``text`` for inputs with ``num_dims`` columns (module docstring).

    Raises :class:`KernelSpecError` (a ``ValueError``) as :func:`read_kernel_spec` does.
    """
    return build_kernel(read_kernel_spec(text, num_dims), num_dims)


def build_kernel(spec: Spec, num_dims: int) -> Kernel:
    """The GPyTorch kernels of a syntax tree whose columns lie in ``0 .. num_dims - 1``."""
    if isinstance(spec, Sum):
        return AdditiveKernel(*(ScaleKernel(build_kernel(term, num_dims)) for term in spec.terms))
    if isinstance(spec, Product):
        return ProductKernel(*(build_kernel(factor, num_dims) for factor in spec.factors))
    columns = list(spec.columns) if spec.columns is not None else list(range(num_dims))
    if isinstance(spec, Additive):
        return AdditiveStructureKernel(_stationary(spec.base, None), num_dims=len(columns), active_dims=columns)
    if spec.name in _STATIONARY:
        return _stationary(spec.name, columns)
    if spec.name == "linear":
        return exact_target("linear").build(active_dims=columns)
    return exact_target("offset_polynomial").build(power=spec.degree, active_dims=columns)


def _stationary(name: str, columns: list[int] | None) -> Kernel:
    """A stationary kernel (RBF, Matérn) on ``columns`` with one lengthscale each (None: every column, one
    lengthscale)."""
    ard = len(columns) if columns is not None else None
    return exact_target(name).build(ard_num_dims=ard, active_dims=columns)


class _Parser:
    """Recursive descent over the tokens of one spec; the nesting limit bounds the recursion."""

    def __init__(self, text: str, num_dims: int | None) -> None:
        self.text, self.num_dims = text, num_dims
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while position < len(text.rstrip()):
            match = _TOKEN.match(text, position)
            if match is None:
                raise self.error(position, "a kernel name, a number or one of + * ( ) [ ] : ,")
            kind = match.lastgroup
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.index = 0

    def error(self, position: int, expected: str) -> KernelSpecError:
        before, after = _shorten(self.text[:position], keep_end=True), _shorten(self.text[position:])
        return KernelSpecError(
            self.text,
            f"expected {expected} at position {position} ({before!r} <here> {after!r}); "
            "e.g. 'rbf[0:3]*matern52[3:6]+linear'.",
        )

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, value: str | None = None, kind: str | None = None) -> tuple[str, str, int]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value) or (kind is not None and token[0] != kind):
            position = token[2] if token is not None else len(self.text)
            raise self.error(position, repr(value) if value is not None else _KINDS[kind])
        self.index += 1
        return token

    def at(self, value: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "op" and token[1] == value

    def expect_end(self) -> None:
        token = self.peek()
        if token is not None:
            raise self.error(token[2], "'+', '*' or the end")

    def expression(self, depth: int) -> Spec:
        terms = [self.term(depth)]
        while self.at("+"):
            self.take("+")
            terms.append(self.term(depth))
        return terms[0] if len(terms) == 1 else Sum(tuple(terms))

    def term(self, depth: int) -> Spec:
        factors = [self.factor(depth)]
        while self.at("*"):
            self.take("*")
            factors.append(self.factor(depth))
        return factors[0] if len(factors) == 1 else Product(tuple(factors))

    def factor(self, depth: int) -> Spec:
        if self.at("("):
            _, _, position = self.take("(")
            if depth == MAX_NESTING:
                raise self.error(position, f"a kernel name: parentheses nest at most {MAX_NESTING} deep")
            inner = self.expression(depth + 1)
            self.take(")")
            return inner
        _, name, position = self.take(kind="name")
        if name == "additive":
            self.take("(")
            _, base, base_position = self.take(kind="name")
            if base not in _STATIONARY:
                raise self.error(base_position, f"a stationary kernel inside additive(...) ({', '.join(_STATIONARY)})")
            self.take(")")
            return Additive(base, self.dims())
        if name in _STATIONARY or name == "linear":
            return Base(name, self.dims())
        degree = re.fullmatch(rf"poly(\d{{1,{_MAX_DIGITS}}})", name)
        if degree is not None and int(degree.group(1)) >= 1:
            return Base("poly", self.dims(), int(degree.group(1)))
        raise self.error(position, f"a kernel name ({', '.join(_BASES)}), not {_shorten(name)!r}")

    def dims(self) -> Columns:
        if not self.at("["):
            return None
        self.take("[")
        first = self.column()
        if self.at(":"):
            self.take(":")
            expected = f"an end column in {first + 1} .. {self.num_dims if self.num_dims is not None else 'd'}"
            end = self.integer(expected)
            if not first < end <= (self.num_dims if self.num_dims is not None else end):
                raise self.error(self.tokens[self.index - 1][2], expected)
            columns: Columns = range(first, end)
        else:
            indices = [first]
            while self.at(","):
                self.take(",")
                indices.append(self.column())
            columns = tuple(indices)
        self.take("]")
        return columns

    def column(self) -> int:
        if self.num_dims is None:
            return self.integer(f"a column number of at most {_MAX_DIGITS} digits")
        expected = f"a column in 0 .. {self.num_dims - 1} (the data has {self.num_dims} columns)"
        value = self.integer(expected)
        if value >= self.num_dims:
            raise self.error(self.tokens[self.index - 1][2], expected)
        return value

    def integer(self, expected: str) -> int:
        """The next token as an int, refused (as ``expected``) when it is no number or too long to be a column."""
        token = self.peek()
        if token is None or token[0] != "int" or len(token[1]) > _MAX_DIGITS:
            raise self.error(token[2] if token is not None else len(self.text), expected)
        return int(self.take(kind="int")[1])
