"""Dollars as every reader shows them: the summary, ``fxtr show``, the report, the viewer."""

from __future__ import annotations


def format_usd(value: float | None) -> str:
    """Dollars as the summary, the command and the viewer show them (6 places under a cent).

    ``n/a`` for a cost nobody knows (an unpriced model), never ``$0.0000``.
    """
    if value is None:
        return "n/a"
    return f"${value:.4f}" if value >= 0.01 or value == 0 else f"${value:.6f}"


def format_cost(value: float | None, unpriced: int = 0) -> str:
    """Dollars of invocations of which ``unpriced`` made calls with no price.

    ``n/a`` when none was priced, ``$x + n/a`` when some were: an unpriced call is never $0.
    """
    if unpriced and not value:
        return "n/a"
    return format_usd(value) + (" + n/a" if unpriced else "")
