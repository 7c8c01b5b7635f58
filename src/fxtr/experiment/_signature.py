"""Signatures of steps and workflows, read from their annotations at decoration time."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any, Literal

from fxtr.experiment._array import Array
from fxtr.experiment._handle import ArrayHandle, ScalarHandle
from fxtr.experiment._types import Dim, format_dims, parse_dims, type_name
from fxtr.experiment._types import value_type_problem as _value_problem
from fxtr.experiment.errors import SignatureError

Owner = Literal["step", "workflow"]
NO_DEFAULT: Any = inspect.Parameter.empty
"""A parameter without a default."""
Kind = Literal["value", "array", "handle"]


@dataclasses.dataclass(frozen=True, slots=True)
class Param:
    """One input (or the result) of a step or workflow."""

    name: str
    value_type: Any
    """Type of each value: ``str``, ``Answer``, ``BoundID[Answer]``, ``list[int]``, ..."""
    dims: tuple[Dim, ...]
    """Declared dimensions; ``()`` for a single value."""
    kind: Kind
    """``value``: a bare value; ``array``: an ``Array`` (steps); ``handle``: a handle."""
    default: Any = NO_DEFAULT
    """A workflow's plain-value parameter may have one (``samples: int = 1``): inputs may
    leave it out."""

    def describe(self) -> str:
        """The parameter as written: ``answer: str``, ``scores: Array[float][sample: int]``."""
        if self.kind == "value":
            return f"{self.name}: {type_name(self.value_type)}"
        wrapper = "Array" if self.kind == "array" else "ArrayHandle"
        dims = format_dims(self.dims)
        return f"{self.name}: {wrapper}[{type_name(self.value_type)}] with dims {dims}"


@dataclasses.dataclass(frozen=True, slots=True)
class Signature:
    """Inputs and result of a step or workflow."""

    params: dict[str, Param]
    result: Param | None
    """``None`` for a workflow that returns nothing."""


def _param_text(param: inspect.Parameter) -> str:
    """A parameter as it is written (string annotations unquoted)."""
    text = param.name
    if param.annotation is not inspect.Parameter.empty:
        ann = param.annotation
        text += f": {ann if isinstance(ann, str) else inspect.formatannotation(ann)}"
    if param.default is not inspect.Parameter.empty:
        text += f" = {param.default!r}"
    return text


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def _parse_annotation(
    owner: Owner, name: str, annotation: Any, problems: list[str], where: str
) -> Param | None:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *meta = typing.get_args(annotation)
        inner_origin = typing.get_origin(inner) or inner
        spec = next((m for m in meta if isinstance(m, str)), None)
        if inner_origin not in (Array, ArrayHandle, ScalarHandle):
            return _parse_annotation(owner, name, inner, problems, where)
        if spec is None:
            problems.append(
                f"{where} is Annotated[{type_name(inner)}, ...] without a dimension string; "
                f'write Annotated[{type_name(inner)}, "[dim: str]"] (or "[]" for a scalar)'
            )
            return None
        try:
            dims = parse_dims(spec)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
            return None
        args = typing.get_args(inner)
        value_type = args[0] if args else Any
        if inner_origin is ScalarHandle and dims:
            problems.append(f"{where} is a ScalarHandle with dimensions {spec!r}; use ArrayHandle")
            return None
        want = Array if owner == "step" else ArrayHandle
        if inner_origin is ScalarHandle:
            inner_origin = ArrayHandle
        if inner_origin is not want:
            problems.append(
                f"{where} is annotated {inner_origin.__name__}[...], but a {owner} "
                + (
                    'receives concrete data: annotate it Annotated[Array[T], "[...]"]'
                    if owner == "step"
                    else 'schedules on handles: annotate it Annotated[ArrayHandle[T], "[...]"]'
                )
            )
            return None
        problem = _value_problem(value_type)
        if problem:
            problems.append(f"{where}: {problem}")
            return None
        return Param(name, value_type, dims, "array" if owner == "step" else "handle")
    if origin is ScalarHandle or annotation is ScalarHandle:
        args = typing.get_args(annotation)
        if owner == "step":
            problems.append(
                f"{where} is a ScalarHandle, but a step receives concrete data: annotate it "
                "with the value's type instead"
            )
            return None
        value_type = args[0] if args else Any
        problem = _value_problem(value_type)
        if problem:
            problems.append(f"{where}: {problem}")
            return None
        return Param(name, value_type, (), "handle")
    if origin in (Array, ArrayHandle) or annotation in (Array, ArrayHandle):
        shown = type_name(annotation)
        problems.append(
            f'{where} is {shown} without dimensions; write Annotated[{shown}, "[dim: str]"] '
            "(no Python type can name dimensions, so the string says them)"
        )
        return None
    problem = _value_problem(annotation)
    if problem:
        problems.append(f"{where}: {problem}")
        return None
    return Param(name, annotation, (), "value")


def read_signature(fn: Callable[..., Any], owner: Owner, label: str) -> Signature:
    """Read a step's or workflow's signature from its annotations.

    Args:
        fn: the decorated ``async def``.
        owner: ``"step"`` or ``"workflow"``.
        label: the ``name=`` given to the decorator, for messages.

    Raises:
        SignatureError: listing every problem at once, each with its fix.
    """
    where_fn = f"{owner.capitalize()} {label!r} ({_fn_name(fn)})"
    if not inspect.iscoroutinefunction(fn):
        msg = f"{where_fn} must be an 'async def' function; @{owner} decorates coroutines."
        raise SignatureError(msg)
    sig = inspect.signature(fn)
    parameters = list(sig.parameters.values())
    if not parameters or parameters[0].name != "context":
        ctx = "StepContext" if owner == "step" else "WorkflowContext"
        others = [_param_text(p) for p in parameters if p.name != "context"]
        fixed = ", ".join([f"context: {ctx}", *others])
        fn_name = getattr(fn, "__name__", "fn")
        got = ", ".join(_param_text(p) for p in parameters) or "no parameters"
        msg = (
            f"{where_fn} must take 'context: {ctx}' as its first parameter (it takes "
            f"{got}). Write: async def {fn_name}({fixed})"
        )
        raise SignatureError(msg)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        msg = (
            f"{where_fn} has annotations that cannot be resolved ({exc}). Import every type "
            "its annotations name at module level."
        )
        raise SignatureError(msg) from exc
    problems: list[str] = []
    params: dict[str, Param] = {}
    for p in parameters[1:]:
        where = f"parameter {p.name!r}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            problems.append(f"{where} is variadic; declare every input by name")
            continue
        if p.name not in hints:
            problems.append(f"{where} has no annotation; annotate it, e.g. '{p.name}: str'")
            continue
        param = _parse_annotation(owner, p.name, hints[p.name], problems, where)
        if param is not None and p.default is not p.empty and owner == "workflow":
            if param.kind != "value":
                problems.append(
                    f"{where} is a handle with a default; only plain-value parameters "
                    f"(e.g. 'samples: int = 1') may have one"
                )
                continue
            param = dataclasses.replace(param, default=p.default)
        if param is not None:
            params[p.name] = param
    result: Param | None = None
    if "return" not in hints:
        problems.append("the result has no annotation; annotate it, e.g. '-> str'")
    elif owner == "workflow" and hints["return"] in (None, type(None)):
        result = None
    else:
        result = _parse_annotation(owner, "return", hints["return"], problems, "the result")
        if owner == "workflow" and result is not None and result.kind == "value":
            problems.append(
                f"the result is {type_name(hints['return'])}, but a workflow returns a handle: "
                'annotate it ScalarHandle[T] or Annotated[ArrayHandle[T], "[...]"]'
            )
    if problems:
        msg = f"{where_fn} has a bad signature: " + "; ".join(problems) + "."
        raise SignatureError(msg)
    return Signature(params, result)
