"""The ``Estimate`` every function of :mod:`fxtr.stats` returns (standard library only)."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["Estimate"]


@dataclasses.dataclass(frozen=True, slots=True)
class Estimate:
    """An estimate with its standard error and confidence interval.

    Attributes:
        value: the point estimate (a mean, a proportion or a mean difference).
        stderr: its standard error; ``None`` when it cannot be estimated (one value, one
            cluster).
        low: the lower end of the interval (``None`` with ``stderr``).
        high: the upper end of the interval (``None`` with ``stderr``).
        n: the number of values (or trials) the estimate is made of.
        clusters: the number of clusters when the standard error is clustered, else ``None``.
        df: the degrees of freedom of the t interval (``None`` for Wilson or no interval).
        method: how the interval was made: ``"t"``, ``"clustered-t"``, ``"wilson"``, and for
            the judges' statistics ``"rogan-gladen"`` and ``"cohen"``.
        confidence: the interval's confidence level.
    """

    value: float
    stderr: float | None
    low: float | None
    high: float | None
    n: int
    clusters: int | None = None
    df: int | None = None
    method: str = "t"
    confidence: float = 0.95

    def as_dict(self) -> dict[str, Any]:
        """The estimate as a JSON-ready dict (every field)."""
        return dataclasses.asdict(self)
