"""Numbers and labels, one format everywhere (the summary, the Markdown, ``fxtr show``)."""

from __future__ import annotations

import json
from typing import Any

WIDTH = 100
"""The summary never gets wider than this many columns."""


# numbers: one format everywhere


def num(value: float | None) -> str:
    """A score, a mean, a difference or a threshold: ``fxtr.report``'s one formatter."""
    from fxtr.report._evals import format_score

    return format_score(value)


def interval(low: float | None, high: float | None) -> str:
    """``[low, high]`` with the same three decimals."""
    from fxtr.report._evals import format_interval

    return format_interval(low, high)


def usd(value: float | None) -> str:
    """Dollars, ``n/a`` for a price nobody knows (never ``$0.0000``)."""
    from fxtr.report import format_usd

    return "n/a" if value is None else format_usd(value)


def short(text: str | None, width: int) -> str:
    """One line of at most ``width`` characters."""
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def case_label(key: Any) -> str:
    """A case key as the summary names it (``c1``; ``case=c1, lang=fr`` for several dims)."""
    if isinstance(key, str):
        try:
            key = json.loads(key)
        except ValueError:
            return str(key)
    if isinstance(key, (list, tuple)):
        key = dict(key)
    if isinstance(key, dict):
        return ", ".join(str(v) for v in key.values()) if len(key) == 1 else describe(key)
    return str(key)


def describe(group: dict[str, Any]) -> str:
    """A group as the summary names it: ``model=a`` (``all cases`` when empty)."""
    return ", ".join(f"{k}={v}" for k, v in group.items()) or "all cases"


# cost
