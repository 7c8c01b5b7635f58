"""Arrays: values indexed by named dimensions with typed keys."""

from fxtr.experiment._array import Array

__all__ = ["Array"]
