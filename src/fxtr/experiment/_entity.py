"""Entities: frozen, typed records, and ``BoundID[T]`` references to them by content hash."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar, dataclass_transform

from fxtr.experiment._types import register_entity_classes, value_type_problem

E = TypeVar("E", bound="Entity")

_REGISTRY: dict[str, type[Entity]] = {}
"""Entity classes by ``module:qualname``, so stored entities can be decoded in this process."""


def entity_type_key(cls: type) -> str:
    """The stable name an entity type is stored under: ``module:qualname``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def lookup_entity_type(key: str) -> type[Entity]:
    """Find an entity class by its stored name, importing its module when needed.

    Raises:
        LookupError: no such class can be found.
    """
    cls = _REGISTRY.get(key)
    if cls is not None:
        return cls
    module, _, qualname = key.partition(":")
    try:
        import importlib

        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        msg = (
            f"Entity type {key!r} is stored in the record but cannot be found. Import the "
            "module that defines it, or restore the class under that name."
        )
        raise LookupError(msg) from None
    return typing.cast("type[Entity]", obj)


@dataclass_transform(frozen_default=True, kw_only_default=True)
class Entity:
    """Base class of frozen, typed records that can cross step boundaries.

    Subclasses are made frozen keyword-only dataclasses. Their fields must be JSON-like
    types, entities or ``BoundID[...]`` references, checked when the class is defined.

    Example::

        class Answer(Entity):
            question: str
            text: str
    """

    __entity_fields__: ClassVar[tuple[str, ...]] = ()
    __added_fields__: ClassVar[tuple[str, ...]] = ()
    """Fields added to the class after stores held its values: left out of the encoding (so
    out of ids and fingerprints) while they hold their default, so values made before and
    after the field was added encode alike and cached results keep serving."""
    __entity_defaults__: ClassVar[dict[str, Any]] = {}
    """The default of each added field (``__added_fields__``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        cls.__entity_fields__ = tuple(f.name for f in fields)
        cls.__entity_defaults__ = {
            f.name: f.default for f in fields if f.name in cls.__added_fields__
        }
        missing = set(cls.__added_fields__) - set(cls.__entity_defaults__)
        if missing or dataclasses.MISSING in cls.__entity_defaults__.values():
            msg = (
                f"Entity {cls.__qualname__}: __added_fields__ names fields that must exist and "
                f"have a plain default: {sorted(missing) or cls.__added_fields__}."
            )
            raise TypeError(msg)
        _REGISTRY[entity_type_key(cls)] = cls
        _check_field_types(cls)

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        """The resolved annotation of each field."""
        hints = typing.get_type_hints(cls)
        return {name: hints[name] for name in cls.__entity_fields__}


def _check_field_types(cls: type[Entity]) -> None:
    try:
        hints = cls.field_types()
    except NameError:
        return  # forward references to classes not defined yet; the encoder still checks values
    problems = [
        f"field {name!r}: {problem}"
        for name, tp in hints.items()
        if (problem := value_type_problem(tp)) is not None
    ]
    if problems:
        msg = (
            f"Entity {cls.__qualname__} has fields that cannot be stored: "
            + "; ".join(problems)
            + ". Use JSON-like types (str, int, float, bool, None, list, dict), other "
            "entities, or BoundID[...] references."
        )
        raise TypeError(msg)


class BoundID(Generic[E]):
    """A typed reference to a stored entity; its ``id`` is the hash of the entity's content.

    Annotate a step parameter ``BoundID[Answer]`` to receive the reference, or ``Answer`` to
    receive the loaded object.
    """

    __slots__ = ("entity_type", "id")

    id: str
    """Content hash (sha256 hex) of the entity's canonical encoding."""
    entity_type: type[E]
    """The entity class the reference points at."""

    def __init__(self, id: str, entity_type: type[E]) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "entity_type", entity_type)

    def __setattr__(self, name: str, value: Any) -> None:
        msg = "BoundID is immutable"
        raise AttributeError(msg)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, BoundID)
            and other.id == self.id
            and other.entity_type is self.entity_type
        )

    def __hash__(self) -> int:
        return hash((self.id, self.entity_type))

    def __repr__(self) -> str:
        return f"BoundID[{self.entity_type.__qualname__}]({self.id[:12]!r})"

    @classmethod
    def of(cls, entity: E) -> BoundID[E]:
        """The reference an entity gets when stored (its content hash)."""
        if _content_hash is None:  # pragma: no cover - _encoding is imported with the package
            msg = "fxtr.experiment._encoding is not loaded; import fxtr.experiment first."
            raise RuntimeError(msg)
        return cls(_content_hash(entity), type(entity))


_content_hash: Callable[[Any], str] | None = None
"""The canonical fingerprint of a value, installed by ``_encoding`` (which imports this
module; this module never imports it)."""


def install_content_hash(fn: Callable[[Any], str]) -> None:
    """Called once by ``_encoding``: how ``BoundID.of`` hashes an entity."""
    global _content_hash
    _content_hash = fn


register_entity_classes(Entity, BoundID)
