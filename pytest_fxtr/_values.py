"""An eval's values checked around its job, each problem named by its case.

Inputs with no canonical encoding before it runs; scores that are not finite numbers after.
"""

from __future__ import annotations

from typing import Any


def unencodable_cases(ev: Any) -> str:
    """The cases whose parametrized values have no canonical encoding, with the problem.

    A job refused for one of its inputs says which case and argument it was.
    """
    import reprlib

    from fxtr.experiment._encoding import EncodingError, encode_text

    found = []
    for item in ev.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for name, value in params.items():
            try:
                encode_text(value)
            except EncodingError as exc:
                shown = reprlib.repr(value)
                found.append(f"\n  case {item.callspec.id!r}, argument {name!r} ({shown}): {exc}")
            except RecursionError:
                found.append(
                    f"\n  case {item.callspec.id!r}, argument {name!r}: nests too deeply to "
                    "encode (flatten it, or make it an Entity)"
                )
            if len(found) >= 5:
                return "".join(found)
    return "".join(found)


def warn_non_finite(ev: Any) -> None:
    """Say which cases scored NaN or an infinity (the gate counts them missing)."""
    import math
    import warnings

    job = ev.job
    partial = getattr(job, "partial_output", None)
    if partial is None:
        return
    bad = []
    for key, value in partial.items():
        number = getattr(value, "value", value) if not isinstance(value, float) else value
        if isinstance(number, float) and not math.isfinite(number):
            where = ", ".join(f"{d}={k}" for d, k in zip(partial.dims, key, strict=True))
            bad.append(f"{where or 'the output'}: {number!r}")
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        warnings.warn(
            f"fxtr: {ev.nodeid}: {len(bad)} score(s) are not finite numbers ({shown}); they "
            "count as missing in the score gate. Return a finite number, or raise in the step "
            "so that the case fails with its reason.",
            RuntimeWarning,
            stacklevel=2,
        )
