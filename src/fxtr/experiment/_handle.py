"""Handles: typed references to arrays a job will compute, and field queries over them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fxtr.experiment._types import Dim, format_dims, type_name

if TYPE_CHECKING:
    from fxtr.experiment._array import Array
    from fxtr.experiment._graph import Node

T = TypeVar("T")


class ArrayHandle(Generic[T]):
    """A reference to an array that may not be computed yet, with its type known now.

    Handles come from scheduling (``context.run_step`` and friends). Pass them to other
    operations to make edges; ``await`` their data only to decide what to schedule next.
    """

    __slots__ = ("_node",)

    def __init__(self, node: Node) -> None:
        self._node = node

    @property
    def dims(self) -> tuple[str, ...]:
        """The dimension names of the array this handle will hold."""
        return tuple(d.name for d in self._node.dims)

    @property
    def dim_specs(self) -> tuple[Dim, ...]:
        """The dimensions with their key types."""
        return self._node.dims

    @property
    def value_type(self) -> Any:
        """The type of each value."""
        return self._node.value_type

    async def observe(self) -> Array[T]:
        """Wait for the array and return it. Pauses only this workflow.

        Raises:
            UpstreamFailedError: a cell has no value because its step failed, was skipped,
                or awaits review.
        """
        __tracebackhide__ = True
        return await self._node.observe()

    async def item(self) -> T:
        """Wait for a scalar handle's one value.

        Raises:
            ValueError: the handle has dimensions.
            UpstreamFailedError: as for ``observe``.
        """
        __tracebackhide__ = True
        if self._node.dims:
            msg = (
                f"item() needs a scalar handle, but {self._node.label!r} has dimensions "
                f"{format_dims(self._node.dims)}. Use observe(), or map a step over them."
            )
            raise ValueError(msg)
        array = await self._node.observe()
        return array.item()  # type: ignore[no-any-return]

    def field(self, name: str) -> FieldQuery:
        """A query projecting field ``name`` of each value (entities are loaded)."""
        return FieldQuery(self, (name,))

    def __repr__(self) -> str:
        return (
            f"ArrayHandle[{type_name(self.value_type)}]{format_dims(self._node.dims)}"
            f"({self._node.label!r})"
        )

    def __await__(self) -> Any:
        msg = (
            "A handle is not awaitable; use 'await handle.observe()' for the array or "
            "'await handle.item()' for a scalar's value."
        )
        raise TypeError(msg)


class ScalarHandle(ArrayHandle[T]):
    """A handle to a single value: ``Annotated[ArrayHandle[T], "[]"]``."""

    __slots__ = ()


class FieldQuery:
    """A projection of fields of a handle's values; ``collect()`` makes it a handle."""

    __slots__ = ("_handle", "_path")

    def __init__(self, handle: ArrayHandle[Any], path: tuple[str, ...]) -> None:
        self._handle = handle
        self._path = path

    def field(self, name: str) -> FieldQuery:
        """Project a further field."""
        return FieldQuery(self._handle, (*self._path, name))

    def collect(self) -> ArrayHandle[Any]:
        """The query as a handle with the same dimensions.

        Raises:
            SignatureError: a field does not exist on the value type.
        """
        from fxtr.experiment._graph import field_node

        node = field_node(self._handle._node, self._path)
        return make_handle(node)

    def __repr__(self) -> str:
        return f"{self._handle!r}.field({'.'.join(self._path)!r})"


def make_handle(node: Node) -> ArrayHandle[Any]:
    """A handle over an engine node; scalar nodes get a ``ScalarHandle``."""
    return ScalarHandle(node) if not node.dims else ArrayHandle(node)
