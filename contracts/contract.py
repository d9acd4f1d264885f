"""What a contract is, and how one is applied to an implementation (docs/crosshair.md).

A :class:`Contract` is written once, over a *case*: a frozen dataclass of plain ints and
bools (image sizes as ints, item offsets and lengths, budgets). It holds

- ``pre``: which cases are in the contract's domain;
- ``post``: what any correct implementation's result must satisfy for that case, as a
  description of the violation (``None`` when it holds);
- ``implementation``: how to turn an adapter (``spec.adapter.Adapter``) into the pure
  function ``case -> result`` the contract is about — the thin wrapper that builds the
  component, feeds it the case and reduces its answer to plain values.

:func:`checkable` joins a contract and an implementation into one function in the
shape CrossHair's ``asserts`` analysis reads: its leading ``assert`` is the
precondition, any later failed ``assert`` (or any exception the implementation raises
on a case inside the domain) is a counterexample. The same contract is applied,
unchanged, to the reference, to any adapter and to the mutants of
``contracts.mutants``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from spec.adapter import Adapter

CaseT = TypeVar("CaseT")
ResultT = TypeVar("ResultT")

#: The pure function a contract is about: a case in, plain values out.
Implementation = Callable[[CaseT], ResultT]


@dataclass(frozen=True)
class Contract(Generic[CaseT, ResultT]):
    """A pre/postcondition pair over one case type, and how to reach an adapter's
    implementation of the function it constrains."""

    name: str
    #: SPEC.md clauses whose arithmetic the postcondition states.
    clauses: tuple[str, ...]
    #: The function under contract, in words (shown by ``python -m contracts``).
    subject: str
    case_type: type[CaseT]
    pre: Callable[[CaseT], bool]
    post: Callable[[CaseT, ResultT], str | None]
    #: The adapter's implementation, or ``None`` when the adapter lacks the component.
    implementation: Callable[[Adapter], Implementation[CaseT, ResultT] | None]
    #: CrossHair iterations (execution paths tried) for ``make crosshair``.
    iterations: int
    #: Zoo entries (``adapters.zoo.<name>``) and mutants
    #: (``contracts.mutants``) this contract must reject within ``iterations``:
    #: the evidence that it can fail.
    rejects: tuple[str, ...]


def checkable(
    contract: Contract[CaseT, ResultT], implementation: Implementation[CaseT, ResultT]
) -> Callable[[CaseT], None]:
    """``contract`` applied to ``implementation``: a function of one case, annotated with
    the case type (CrossHair builds a symbolic case from it), whose first statement
    asserts the precondition and whose last asserts the postcondition."""
    pre, post = contract.pre, contract.post

    def check(case: Any) -> None:
        assert pre(case)
        problem = post(case, implementation(case))
        assert problem is None, problem

    check.__annotations__ = {"case": contract.case_type, "return": None}
    return check


def holds(
    contract: Contract[CaseT, ResultT], implementation: Implementation[CaseT, ResultT],
    case: CaseT,
) -> str | None:
    """Evaluate the contract concretely on one case inside its domain: the violation, or
    ``None``. (Tests replay CrossHair's counterexamples with it, without CrossHair.)"""
    if not contract.pre(case):
        raise ValueError(f"{case!r} is outside the domain of contract {contract.name}")
    return contract.post(case, implementation(case))
