"""Prices per million tokens, shipped as data and overridable; unknown models cost ``None``."""

from __future__ import annotations

import json
import logging
import re
import warnings
from importlib import resources
from typing import Any

from fxtr.models._types import Usage

log = logging.getLogger("fxtr.models")


class UnknownPriceWarning(UserWarning):
    """A model has no price in the table; its cost is reported as ``None``, never guessed."""


def _load() -> dict[str, dict[str, float]]:
    text = resources.files("fxtr.models").joinpath("prices.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return {k: v for k, v in data["models"].items()}


PRICES: dict[str, dict[str, float]] = _load()
"""USD per million tokens by model: ``input``, ``output``, ``cached_input``."""
_warned: set[str] = set()
_DATED = re.compile(r"^-(\d{4}-?\d{2}-?\d{2}|\d{8}|latest)$")


def set_price(
    model: str, *, input: float, output: float, cached_input: float | None = None
) -> None:
    """Add or override a model's price (USD per million tokens)."""
    PRICES[model] = {
        "input": float(input),
        "output": float(output),
        "cached_input": float(input if cached_input is None else cached_input),
    }


def price_of(model: str) -> dict[str, float] | None:
    """The price entry of a model; dated snapshots (``gpt-4o-2024-08-06``) use their family's."""
    if model in PRICES:
        return PRICES[model]
    best = None
    for name in PRICES:
        if (
            model.startswith(name)
            and _DATED.match(model[len(name) :])
            and (best is None or len(name) > len(best))
        ):
            best = name
    return PRICES[best] if best else None


def cost_of(model: str, usage: Usage, *, warn: bool = True) -> float | None:
    """Dollars a call cost, or ``None`` for a model without a price (warned once)."""
    price = price_of(model)
    if price is None:
        if warn and model not in _warned:
            _warned.add(model)
            warnings.warn(
                f"No price for model {model!r}; its cost is reported as None. Add one with "
                f"fxtr.models.set_price({model!r}, input=..., output=...).",
                UnknownPriceWarning,
                stacklevel=3,
            )
        return None
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    return (
        (usage.input_tokens - cached) * price["input"]
        + cached * price.get("cached_input", price["input"])
        + usage.output_tokens * price["output"]
    ) / 1_000_000
