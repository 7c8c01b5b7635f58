"""``@tool``: a function the model may call, as a value (its import path, spec and code hash)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union, overload

import docstring_parser

from fxtr.experiment._definition import _normalized_source_hash
from fxtr.experiment._encoding import encode_text
from fxtr.experiment._entity import Entity
from fxtr.models import ToolSpec

_FUNCTIONS: dict[str, Callable[..., Any]] = {}
"""Tool functions defined in this process by import path (``module:qualname``)."""

ENV_PARAMETER = "env"
"""A tool parameter of this name receives the trajectory's environment, hidden from the model."""


class Tool(Entity):
    """A tool the agent may call: the function's import path, what the model sees, its code.

    Made by ``@tool``. ``code`` hashes the function's normalized source and is part of the
    inputs of each of its calls, so editing a tool sends its cached calls through the
    conflict policy; the model's turns see only ``spec``.
    """

    path: str
    """``module:qualname`` of the function, where a step finds it (in any process)."""
    spec: ToolSpec
    """Name, description and JSON-schema parameters, as sent to the model."""
    code: str
    """Hash of the function's normalized source (comments and docstring aside)."""
    uses_env: bool = False
    """Whether the function takes the hidden ``env`` parameter."""

    @property
    def name(self) -> str:
        """The name the model calls it by."""
        return self.spec.name

    @property
    def fn(self) -> Callable[..., Any]:
        """The function (imported from ``path`` when this process has not defined it)."""
        return tool_function(self.path)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly (a test of the tool itself)."""
        return self.fn(*args, **kwargs)


def tool_function(path: str) -> Callable[..., Any]:
    """The function at ``module:qualname``.

    Raises:
        LookupError: it cannot be imported, naming the path and the fix.
    """
    fn = _FUNCTIONS.get(path)
    if fn is not None:
        return fn
    found = import_path(path, "tool")
    inner = found.fn if isinstance(found, Tool) else found
    _FUNCTIONS[path] = inner
    return inner


def import_path(path: str, what: str) -> Any:
    """The object at ``module:qualname``, or a ``LookupError`` naming it and the fix."""
    module, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        msg = (
            f"The {what} {path!r} cannot be imported ({exc}). Define it at the top level of an "
            "importable module (not inside a function, not a lambda) and keep that name."
        )
        raise LookupError(msg) from None
    return obj


def path_of(fn: Callable[..., Any], what: str) -> str:
    """``module:qualname`` of a top-level function, or a ``ValueError`` naming the fix."""
    if not callable(fn) or not hasattr(fn, "__qualname__"):
        msg = f"The {what} must be a function, got {fn!r}."
        raise TypeError(msg)
    qualname = fn.__qualname__
    if "<locals>" in qualname or "<lambda>" in qualname:
        msg = (
            f"The {what} {qualname!r} is not importable: a step finds it by its import path, "
            "so define it at the top level of a module (not inside a function, not a lambda)."
        )
        raise ValueError(msg)
    return f"{fn.__module__}:{qualname}"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function (sync or async) a tool the agent may call.

    The JSON schema of its parameters comes from the type hints (``str``, ``int``, ``float``,
    ``bool``, ``list[...]``, ``dict``, ``Literal[...]``, ``X | None``, defaults) and the
    Google-style docstring: its first paragraph describes the tool, its ``Args:`` section
    each parameter. A parameter named ``env`` is not shown to the model: it receives the
    trajectory's environment, which the tool may change in place.

    Example: ``@tool def add(a: float, b: float) -> float`` with the docstring ``"Add two
    numbers."`` and an ``Args:`` section ``a: the first number.``.

    Args:
        fn: the function (``@tool`` without parentheses).
        name: the name the model calls it by (default: the function's name).
        description: what the model is told it does (default: the docstring's first
            paragraph).

    Raises:
        TypeError: a parameter has no type hint, or one that has no JSON schema.
        ValueError: the function is not importable (defined in a function, a lambda).
    """

    def decorate(f: Callable[..., Any]) -> Tool:
        return _make_tool(f, name, description)

    return decorate(fn) if fn is not None else decorate


def _make_tool(fn: Callable[..., Any], name: str | None, description: str | None) -> Tool:
    if isinstance(fn, Tool):
        fn = fn.fn
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    arg_docs = {p.arg_name: (p.description or "").strip() for p in doc.params}
    try:
        hints = typing.get_type_hints(fn)
    except NameError as exc:
        msg = f"Tool {fn.__qualname__!r} has a type hint that cannot be resolved: {exc}."
        raise TypeError(msg) from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    problems: list[str] = []
    uses_env = False
    for p in inspect.signature(fn).parameters.values():
        if p.name == ENV_PARAMETER:
            uses_env = True
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            problems.append(f"*{p.name} (name every parameter)")
            continue
        if p.name not in hints:
            problems.append(f"{p.name!r} has no type hint (write e.g. '{p.name}: str')")
            continue
        try:
            schema = json_schema(hints[p.name])
        except TypeError as exc:
            problems.append(f"{p.name!r}: {exc}")
            continue
        if arg_docs.get(p.name):
            schema["description"] = arg_docs[p.name]
        if p.default is p.empty:
            required.append(p.name)
        else:
            try:
                json.dumps(p.default)
            except TypeError:
                problems.append(f"{p.name!r} has a default that is not JSON ({p.default!r})")
                continue
            schema["default"] = p.default
        properties[p.name] = schema
    if problems:
        msg = (
            f"Tool {fn.__qualname__!r} cannot be described to the model: "
            + "; ".join(problems)
            + ". Annotate each parameter with str, int, float, bool, list[...], dict, "
            "Literal[...] or X | None."
        )
        raise TypeError(msg)
    path = path_of(fn, "tool")
    summary = "\n\n".join(
        part for part in (doc.short_description, doc.long_description) if part
    ).strip()
    spec = ToolSpec(
        name=name or fn.__name__,
        description=description if description is not None else summary,
        parameters={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    )
    _FUNCTIONS[path] = fn
    return Tool(path=path, spec=spec, code=_normalized_source_hash(fn), uses_env=uses_env)


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON schema of a type hint.

    Raises:
        TypeError: a type that has no JSON schema here.
    """
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if tp in (type(None), None):
        return {"type": "null"}
    if tp is Any:
        return {}
    if tp in (list, tuple):
        return {"type": "array"}
    if tp is dict:
        return {"type": "object"}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [json_schema(a) for a in args]}
    if origin is Literal:
        kinds = {_SCALARS.get(type(a)) for a in args}
        schema: dict[str, Any] = {"enum": list(args)}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if origin in (list, tuple):
        return {"type": "array", "items": json_schema(args[0])} if args else {"type": "array"}
    if origin is dict:
        if args and args[0] is not str:
            msg = f"dict keys must be str, got {tp!r}"
            raise TypeError(msg)
        if len(args) == 2:
            return {"type": "object", "additionalProperties": json_schema(args[1])}
        return {"type": "object"}
    if origin is typing.Annotated:
        return json_schema(args[0])
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        msg = f"{tp.__qualname__} is a class; take its fields as parameters or a dict"
        raise TypeError(msg)
    msg = f"{getattr(tp, '__qualname__', tp)!r} has no JSON schema"
    raise TypeError(msg)


def _content(value: Any, tool: Tool) -> str:  # the name the loop's tool step calls
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if isinstance(value, Entity):
        value = json.loads(encode_text(value))
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        msg = (
            f"Tool {tool.name!r} returned a {type(value).__name__} ({value!r:.80}), which "
            "cannot be sent to the model: return a str, a number, a bool, None, or a list "
            "or dict of those."
        )
        raise TypeError(msg) from None
