"""Entities: frozen, typed records, and ``BoundID[T]`` references to them."""

from fxtr.experiment._entity import BoundID, Entity

__all__ = ["BoundID", "Entity"]
