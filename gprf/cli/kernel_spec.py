r"""Composite kernel specs of ``--kernel``: a short text for a GPyTorch kernel expression.

Grammar (``+`` binds looser than ``*``; parentheses group)::

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
"""

from __future__ import annotations

import re

from gpytorch.kernels import (
    AdditiveKernel,
    AdditiveStructureKernel,
    Kernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    ProductKernel,
    RBFKernel,
    ScaleKernel,
)

_STATIONARY = {"rbf": None, "matern12": 0.5, "matern32": 1.5, "matern52": 2.5}
_BASES = (*_STATIONARY, "linear", "polyP (P = 1, 2, ...)", "additive(k)")
_TOKEN = re.compile(r"\s*(?:(?P<name>[a-z][a-z0-9]*)|(?P<int>\d+)|(?P<op>[-+*()\[\]:,]))")


def is_composite_spec(text: str) -> bool:
    """Whether ``--kernel`` names a composite expression rather than one of the single-kernel choices."""
    return any(char in text for char in "+*[(") or text == "linear" or text.startswith("poly")


def parse_kernel_spec(text: str, num_dims: int) -> Kernel:
    """The GPyTorch kernel expression of ``text`` for inputs with ``num_dims`` columns (module docstring).

    Raises ``ValueError`` naming the position and what was expected for malformed text, unknown kernels and
    columns outside ``0 .. num_dims - 1``.
    """
    parser = _Parser(text, num_dims)
    kernel = parser.expression()
    parser.expect_end()
    return kernel


class _Parser:
    def __init__(self, text: str, num_dims: int) -> None:
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

    def error(self, position: int, expected: str) -> ValueError:
        return ValueError(
            f"--kernel {self.text!r}: expected {expected} at position {position} "
            f"({self.text[:position]!r} <here> {self.text[position:]!r}); e.g. 'rbf[0:3]*matern52[3:6]+linear'."
        )

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, value: str | None = None, kind: str | None = None) -> tuple[str, str, int]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value) or (kind is not None and token[0] != kind):
            position = token[2] if token is not None else len(self.text)
            raise self.error(position, repr(value) if value is not None else f"a {kind}")
        self.index += 1
        return token

    def at(self, value: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "op" and token[1] == value

    def expect_end(self) -> None:
        token = self.peek()
        if token is not None:
            raise self.error(token[2], "'+', '*' or the end")

    def expression(self) -> Kernel:
        terms = [self.term()]
        while self.at("+"):
            self.take("+")
            terms.append(self.term())
        if len(terms) == 1:
            return terms[0]
        return AdditiveKernel(*(ScaleKernel(term) for term in terms))

    def term(self) -> Kernel:
        factors = [self.factor()]
        while self.at("*"):
            self.take("*")
            factors.append(self.factor())
        return factors[0] if len(factors) == 1 else ProductKernel(*factors)

    def factor(self) -> Kernel:
        if self.at("("):
            self.take("(")
            inner = self.expression()
            self.take(")")
            return inner
        _, name, position = self.take(kind="name")
        if name == "additive":
            self.take("(")
            _, base, base_position = self.take(kind="name")
            if base not in _STATIONARY:
                raise self.error(base_position, f"a stationary kernel inside additive(...) ({', '.join(_STATIONARY)})")
            self.take(")")
            dims = self.dims()
            return AdditiveStructureKernel(self.stationary(base, None), num_dims=len(dims), active_dims=dims)
        dims = self.dims()
        if name in _STATIONARY:
            return self.stationary(name, dims)
        if name == "linear":
            return LinearKernel(active_dims=dims)
        power = re.fullmatch(r"poly(\d+)", name)
        if power is not None and int(power.group(1)) >= 1:
            return PolynomialKernel(power=int(power.group(1)), active_dims=dims)
        raise self.error(position, f"a kernel name ({', '.join(_BASES)}), not {name!r}")

    def stationary(self, name: str, dims: list[int] | None) -> Kernel:
        ard = len(dims) if dims is not None else None
        if _STATIONARY[name] is None:
            return RBFKernel(ard_num_dims=ard, active_dims=dims)
        return MaternKernel(nu=_STATIONARY[name], ard_num_dims=ard, active_dims=dims)

    def dims(self) -> list[int]:
        if not self.at("["):
            return list(range(self.num_dims))
        self.take("[")
        first = self.column()
        if self.at(":"):
            self.take(":")
            _, end, position = self.take(kind="int")
            if not first < int(end) <= self.num_dims:
                raise self.error(position, f"an end column in {first + 1} .. {self.num_dims}")
            columns = list(range(first, int(end)))
        else:
            columns = [first]
            while self.at(","):
                self.take(",")
                columns.append(self.column())
        self.take("]")
        return columns

    def column(self) -> int:
        _, value, position = self.take(kind="int")
        if int(value) >= self.num_dims:
            raise self.error(position, f"a column in 0 .. {self.num_dims - 1} (the data has {self.num_dims} columns)")
        return int(value)
