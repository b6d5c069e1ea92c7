"""The model's PEP 316 contracts, checked at run time.

CrossHair proves the contracts of ``auxspec.models.sequential`` over bounded symbolic
inputs (``auxspec.checks.crosshair``). This module evaluates the same
docstring lines on concrete calls, so the model harness can hold every step
it fuzzes to them: ``pre:`` before the call, ``post:`` after it (with
``__return__``), and ``raises:`` as the only exceptions a step may raise.

    steps = Checked(model)      # the model's functions, each one checked
    state, outcome = steps.put(state, items, retain, release)

    with checked_throughout(model):   # and the calls the model makes to itself
        state, outcome = model.put(state, items, retain, release)
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from types import CodeType, ModuleType, SimpleNamespace
from typing import Any


class ContractViolation(AssertionError):
    """A model step broke one of its own contracts."""


@dataclass(frozen=True)
class Contract:
    pre: tuple[tuple[str, CodeType], ...]
    post: tuple[tuple[str, CodeType], ...]
    raises: tuple[type[BaseException], ...]

    @property
    def empty(self) -> bool:
        return not (self.pre or self.post)

    @property
    def reads_old(self) -> bool:
        """Whether a condition reads ``__old__`` (the arguments before the
        call): only then are they copied, which costs more than the step."""
        return any("__old__" in _names(code) for _, code in self.pre + self.post)


def _names(code: CodeType) -> set[str]:
    """The global names ``code`` reads, a comprehension's inside it included."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _names(const)
    return found


@cache
def contract_of(function: Callable[..., Any]) -> Contract:
    """The ``pre:``, ``post:`` and ``raises:`` lines of ``function``'s docstring."""
    pre: list[tuple[str, CodeType]] = []
    post: list[tuple[str, CodeType]] = []
    raises: list[type[BaseException]] = []
    for line in (inspect.getdoc(function) or "").splitlines():
        label, _, text = line.strip().partition(":")
        text = text.strip()
        if label == "pre":
            pre.append((text, compile(text, f"<pre of {function.__name__}>", "eval")))
        elif label == "post" or label.startswith("post["):  # post[names]: the step changes those arguments
            post.append((text, compile(text, f"<post of {function.__name__}>", "eval")))
        elif label == "raises":
            # The defining module's names (a decorator's wrapper, such as
            # mutmut's trampoline, has the globals of its own module).
            raises += [inspect.unwrap(function).__globals__[name.strip()] for name in text.split(",")]
    return Contract(tuple(pre), tuple(post), tuple(raises))


@cache
def checked(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with its contract evaluated around every call (one
    wrapper per function, made once: the model harness wraps the module's
    functions for every input)."""
    contract = contract_of(function)
    if contract.empty:
        return function
    signature = inspect.signature(function)
    scope = inspect.unwrap(function).__globals__
    reads_old = contract.reads_old
    # The common call, every argument given by position and none defaulted,
    # is bound by zipping the names: Signature.bind costs more than most steps.
    positional = tuple(
        name for name, parameter in signature.parameters.items() if parameter.kind is parameter.POSITIONAL_OR_KEYWORD
    )
    plain = len(positional) == len(signature.parameters)

    def call(*args: Any, **kwargs: Any) -> Any:
        if plain and not kwargs and len(args) == len(positional):
            arguments = dict(zip(positional, args, strict=True))
        else:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
        # One namespace: a comprehension inside a condition sees only globals.
        names = {**scope, **arguments}
        if reads_old:
            # ``__old__``: the arguments as they were before the call (a step may change those its post[...] names).
            names["__old__"] = SimpleNamespace(**copy.deepcopy(arguments))
        for text, code in contract.pre:
            if not eval(code, names):  # the model's own docstring lines
                raise ContractViolation(f"{function.__name__}: precondition {text!r} does not hold for {arguments}")
        try:
            result = function(*args, **kwargs)
        except contract.raises:
            raise
        except Exception as error:
            unexpected = f"{function.__name__} raised {error!r}, which its contract does not allow"
            raise ContractViolation(unexpected) from error
        names["__return__"] = result
        for text, code in contract.post:
            if not eval(code, names):
                shown = {**arguments, "__return__": result}
                raise ContractViolation(f"{function.__name__}: postcondition {text!r} does not hold for {shown}")
        return result

    call.__name__ = function.__name__
    return call


class Checked:
    """A module's functions, each wrapped by :func:`checked`."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._wrapped: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        found = self._wrapped.get(name)
        if found is None:
            value = getattr(self._module, name)
            found = self._wrapped[name] = checked(value) if inspect.isfunction(value) else value
        return found


@cache
def _contracted(function: Callable[..., Any], module: str) -> bool:
    """Whether ``function`` is of ``module`` and has a contract (asked of
    every function of the module, for every input the model harness runs)."""
    return function.__module__ == module and not contract_of(function).empty


@contextmanager
def checked_throughout(module: ModuleType) -> Iterator[None]:
    """Every function of ``module`` that has a contract replaced by its checked
    form while the block runs, then put back. :class:`Checked` checks the calls
    made to the module; this also checks the calls its functions make to each
    other (a step's helpers, such as the eviction choice, have contracts of
    their own that no outside call reaches)."""
    originals = {
        name: value
        for name, value in vars(module).items()
        if inspect.isfunction(value) and _contracted(value, module.__name__)
    }
    for name, value in originals.items():
        setattr(module, name, checked(value))
    try:
        yield
    finally:
        for name, value in originals.items():
            setattr(module, name, value)


__all__ = ["Checked", "Contract", "ContractViolation", "checked", "checked_throughout", "contract_of"]
