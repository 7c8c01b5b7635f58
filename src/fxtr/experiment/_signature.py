"""Signatures of steps and workflows, read from their annotations at decoration time."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
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


_CONTEXT_NAMES = frozenset({"ctx", "_ctx", "context_", "_context", "cx", "c", "_"})
"""Names users give the context parameter, unannotated, when they do not call it ``context``."""


def _written(fn: Callable[..., Any]) -> dict[str, str]:
    """Each parameter's text exactly as the source writes it (``{}`` without a source)."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return {}
    node = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
        None,
    )
    if node is None:
        return {}
    a = node.args
    texts: dict[str, str] = {}
    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults))
    pairs = [
        *zip(positional, [*defaults, *a.defaults], strict=True),
        *zip(a.kwonlyargs, a.kw_defaults, strict=True),
    ]
    for arg, default in pairs:
        text = arg.arg
        if arg.annotation is not None:
            text += f": {ast.get_source_segment(source, arg.annotation)}"
        if default is not None:
            text += f" = {ast.get_source_segment(source, default)}"
        texts[arg.arg] = text
    return texts


def _is_context_stand_in(param: inspect.Parameter, ctx: str) -> bool:
    """Whether a first parameter is the context under another name (``ctx: StepContext``)."""
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return param.name in _CONTEXT_NAMES
    name = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
    return name.rpartition(".")[2] in ("StepContext", "WorkflowContext", ctx)


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
    first = _context_problem(fn, owner, where_fn, parameters)
    inputs = parameters[1:] if first is None else first[1]
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        if first is not None:
            raise SignatureError(" ".join(first[0])) from None
        msg = (
            f"{where_fn} has annotations that cannot be resolved ({exc}). Import every type "
            "its annotations name at module level."
        )
        raise SignatureError(msg) from exc
    problems: list[str] = []
    params: dict[str, Param] = {}
    for p in inputs:
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
    if first is not None:
        text, write = first[0]
        also = f" Also fix: {'; '.join(problems)}." if problems else ""
        msg = f"{text}{also} {write}"
        raise SignatureError(msg)
    if problems:
        msg = f"{where_fn} has a bad signature: " + "; ".join(problems) + "."
        raise SignatureError(msg)
    return Signature(params, result)


def _context_problem(
    fn: Callable[..., Any], owner: Owner, where_fn: str, parameters: list[inspect.Parameter]
) -> tuple[tuple[str, str], list[inspect.Parameter]] | None:
    """For a first parameter that is not ``context``: the message, the fix, the inputs left.

    The signature it suggests is accepted as written: the context takes the place of a
    stand-in (``ctx``, ``ctx: StepContext``) or goes first, the other parameters stay as the
    source writes them (the caller adds their own problems to the message).
    """
    if parameters and parameters[0].name == "context":
        return None
    ctx = "StepContext" if owner == "step" else "WorkflowContext"
    written = _written(fn)
    texts = [written.get(p.name) or _param_text(p) for p in parameters]
    stand_in = bool(parameters) and _is_context_stand_in(parameters[0], ctx)
    kept = [
        (p, t)
        for i, (p, t) in enumerate(zip(parameters, texts, strict=True))
        if p.name != "context" and not (i == 0 and stand_in)
    ]
    fixed = ", ".join([f"context: {ctx}", *(t for _, t in kept)])
    fn_name = getattr(fn, "__name__", "fn")
    got = ", ".join(texts) or "no parameters"
    rename = f"; rename {parameters[0].name!r} to 'context' in its body" if stand_in else ""
    msg = f"{where_fn} must take 'context: {ctx}' as its first parameter (it takes {got}){rename}."
    return (msg, f"Write: async def {fn_name}({fixed})"), [p for p, _ in kept]
