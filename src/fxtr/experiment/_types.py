"""The value-type algebra: which annotations are values, how they print, what fits where.

Types are kept as the typing objects users write (``str``, ``list[int]``, ``Optional[str]``,
``Answer``, ``BoundID[Answer]``), so error messages can show them as written.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Any, NamedTuple, Union

NoneType = type(None)
JSON_SCALARS: tuple[type, ...] = (str, int, float, bool, NoneType)
KEY_TYPES: dict[str, type] = {"str": str, "int": int}


class Dim(NamedTuple):
    """A named dimension and the type of its keys."""

    name: str
    key_type: type

    def __str__(self) -> str:
        return f"{self.name}: {self.key_type.__name__}"


_DIM_SPEC = re.compile(r"^\s*\[(.*)\]\s*$", re.S)
_DIM_ITEM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([A-Za-z_]+)\s*$")


def parse_dims(spec: str) -> tuple[Dim, ...]:
    """Parse a dimension string such as ``"[model: str, prompt: str]"`` or ``"[]"``.

    Raises:
        ValueError: the string is malformed, a key type is not ``str`` or ``int``, or a
            dimension is named twice.
    """
    match = _DIM_SPEC.match(spec) if isinstance(spec, str) else None
    if match is None:
        msg = (
            f"Dimension string {spec!r} is malformed. Write it as '[name: type, ...]', "
            "for example '[model: str, prompt: str]', or '[]' for a scalar."
        )
        raise ValueError(msg)
    body = match.group(1).strip()
    if not body:
        return ()
    dims: list[Dim] = []
    for part in body.split(","):
        item = _DIM_ITEM.match(part)
        if item is None:
            msg = (
                f"Dimension {part.strip()!r} in {spec!r} is malformed. Write each dimension as "
                "'name: str' or 'name: int'."
            )
            raise ValueError(msg)
        name, key = item.groups()
        if key not in KEY_TYPES:
            msg = (
                f"Dimension {name!r} in {spec!r} has key type {key!r}. Keys must be 'str' or 'int'."
            )
            raise ValueError(msg)
        if any(d.name == name for d in dims):
            msg = f"Dimension {name!r} appears twice in {spec!r}. Give each dimension once."
            raise ValueError(msg)
        dims.append(Dim(name, KEY_TYPES[key]))
    return tuple(dims)


def format_dims(dims: tuple[Dim, ...]) -> str:
    """Format dimensions the way users write them: ``[model: str, prompt: str]``."""
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is Union or origin is types.UnionType


_ENTITY_CLASSES: dict[str, type] = {}
"""``Entity`` and ``BoundID``, registered by ``_entity`` when it is imported (it imports this
module, never the other way round); before that no entity type exists to be recognized."""


def register_entity_classes(entity: type, bound_id: type) -> None:
    """Called once by ``_entity``: the classes ``is_entity_type`` and ``bound_target`` know."""
    _ENTITY_CLASSES.update(entity=entity, bound_id=bound_id)


def _entity_base() -> type:
    return _ENTITY_CLASSES.get("entity", _NoEntity)


def _bound_id() -> type:
    return _ENTITY_CLASSES.get("bound_id", _NoEntity)


class _NoEntity:
    """Stands for the entity classes before ``_entity`` registered them (nothing matches)."""


def is_entity_type(tp: Any) -> bool:
    """Whether ``tp`` is a subclass of ``Entity``."""
    return isinstance(tp, type) and issubclass(tp, _entity_base())


def record_fields(tp: Any) -> dict[str, Any] | None:
    """The fields of a dataclass (not an entity) or ``TypedDict`` type, with their types.

    ``None`` for any other type. A forward reference that cannot be resolved yet is ``Any``.
    """
    is_data = isinstance(tp, type) and dataclasses.is_dataclass(tp) and not is_entity_type(tp)
    if not (is_data or typing.is_typeddict(tp)):
        return None
    try:
        hints = typing.get_type_hints(tp)
    except NameError:
        hints = {}
    if is_data:
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(tp)}
    return {name: hints.get(name, Any) for name in tp.__annotations__}


def bound_target(tp: Any) -> type | None:
    """The entity type of ``BoundID[T]``, or ``None`` when ``tp`` is not one."""
    if typing.get_origin(tp) is _bound_id():
        args = typing.get_args(tp)
        return args[0] if args else None
    return None


def type_name(tp: Any) -> str:
    """A short readable name for a value type, as a user would write it."""
    if tp is NoneType or tp is None:
        return "None"
    if tp is Any:
        return "Any"
    if _is_union(tp):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    origin = typing.get_origin(tp)
    if origin is not None:
        args = typing.get_args(tp)
        base = getattr(origin, "__name__", str(origin))
        if origin is typing.Annotated:
            return type_name(args[0])
        return f"{base}[{', '.join(type_name(a) for a in args)}]"
    if isinstance(tp, type):
        return tp.__qualname__ if is_entity_type(tp) else tp.__name__
    return repr(tp)


def value_type_problem(tp: Any) -> str | None:
    """Why ``tp`` cannot be a value type (JSON-like, entity, reference), or ``None`` if it can."""
    if tp is None or tp is NoneType or tp is Any or tp in JSON_SCALARS:
        return None
    if tp in (list, dict, tuple):
        return None
    if is_entity_type(tp):
        return None
    fields = record_fields(tp)
    if fields is not None:  # a dataclass or a TypedDict: its fields must be values
        for name, field_type in fields.items():
            problem = value_type_problem(field_type)
            if problem:
                return f"field {name!r} of {type_name(tp)}: {problem}"
        return None
    if _is_union(tp):
        for arg in typing.get_args(tp):
            problem = value_type_problem(arg)
            if problem:
                return problem
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is _bound_id():
        if len(args) == 1 and is_entity_type(args[0]):
            return None
        return f"BoundID takes one Entity subclass, got {type_name(tp)}"
    if origin in (list, tuple):
        for arg in args:
            if arg is not Ellipsis:
                problem = value_type_problem(arg)
                if problem:
                    return problem
        return None
    if origin is dict:
        if args and args[0] is not str:
            return f"dict keys must be str, got {type_name(tp)}"
        return value_type_problem(args[1]) if len(args) == 2 else None
    if typing.get_origin(tp) is typing.Literal:
        return None
    return (
        f"{type_name(tp)} is not a JSON-like type, an Entity, BoundID[Entity], a dataclass "
        "or a TypedDict"
    )


def is_assignable(src: Any, dst: Any) -> bool:
    """Whether a value of static type ``src`` fits a parameter typed ``dst``.

    ``int`` fits ``float``, ``BoundID[T]`` fits ``T`` (the entity is loaded), a union fits when
    each member does, and bare ``list``/``dict`` meet their parametrized forms either way.
    """
    if dst is Any or src is Any or src == dst:
        return True
    if src is None:
        src = NoneType
    if dst is None:
        dst = NoneType
    if _is_union(src):
        return all(is_assignable(a, dst) for a in typing.get_args(src))
    if _is_union(dst):
        return any(is_assignable(src, a) for a in typing.get_args(dst))
    if dst is float and src in (int, bool):
        return True
    if dst is int and src is bool:
        return True
    target = bound_target(src)
    if target is not None:
        dst_target = bound_target(dst)
        if dst_target is not None:
            return issubclass(target, dst_target)
        return is_entity_type(dst) and issubclass(target, dst)
    if is_entity_type(src) and is_entity_type(dst):
        return issubclass(src, dst)
    s_origin, d_origin = typing.get_origin(src) or src, typing.get_origin(dst) or dst
    if s_origin is typing.Literal:
        return all(check_value(v, dst) for v in typing.get_args(src))
    if s_origin in (list, tuple) and d_origin in (list, tuple):
        s_args, d_args = typing.get_args(src), typing.get_args(dst)
        if not s_args or not d_args:
            return True
        s_item = s_args[0]
        d_item = d_args[0]
        return is_assignable(s_item, d_item)
    if s_origin is dict and d_origin is dict:
        s_args, d_args = typing.get_args(src), typing.get_args(dst)
        if len(s_args) != 2 or len(d_args) != 2:
            return True
        return is_assignable(s_args[1], d_args[1])
    return False


def check_value(value: Any, tp: Any) -> bool:
    """Whether a runtime ``value`` is an instance of the value type ``tp``.

    Containers are checked item by item; the encoder checks anything deeper.
    """
    if tp is Any:
        return True
    if tp is None or tp is NoneType:
        return value is None
    if tp is float:
        return isinstance(value, (float, int))
    if tp is int:
        return isinstance(value, int)
    if tp in (str, bool):
        return isinstance(value, tp)
    if _is_union(tp):
        return any(check_value(value, a) for a in typing.get_args(tp))
    if typing.is_typeddict(tp):  # a dict with the required keys (no instance checks exist)
        return isinstance(value, dict) and all(k in value for k in tp.__required_keys__)
    if isinstance(tp, type):
        return isinstance(value, tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is _bound_id():
        if not isinstance(value, _bound_id()):
            return False
        entity_type: type = getattr(value, "entity_type")  # noqa: B009
        return issubclass(entity_type, args[0])
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        item = args[0] if args else Any
        return all(check_value(v, item) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            return False
        item = args[1] if len(args) == 2 else Any
        return all(isinstance(k, str) and check_value(v, item) for k, v in value.items())
    if origin is typing.Literal:
        return value in args
    return False
