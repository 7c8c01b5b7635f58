"""Cases: each case's score over its samples, and what groups and comparisons share.

The keys, the gate's bar, clipping and cluster labels; the choices are ``fxtr.scores``'s.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

Key = tuple[tuple[str, Any], ...]
"""A group or case key: ``(dim, key)`` pairs sorted by dimension name."""

STABLE_PASS = "stable_pass"
STABLE_FAIL = "stable_fail"
FLAKY = "flaky"


_GATE_SLACK = 1e-12


class CaseScore(NamedTuple):
    """One case's score, reduced over its samples (a named tuple: cheap to make by the 10,000).

    Attributes:
        value: the mean of the samples that have a value; ``None`` for a missing case.
        n: how many samples have a value.
        samples: how many samples the cell has (with or without a value).
        k: how many samples scored 1 (binary scores only, else ``None``).
        verdict: ``stable_pass``, ``stable_fail`` or ``flaky`` (binary scores with a value).
        binary: every value of the eval's cells is 0 or 1.
        unit: every value of the eval's cells lies in [0, 1].
    """

    value: float | None
    n: int
    samples: int
    k: int | None = None
    verdict: str | None = None
    binary: bool = False
    unit: bool = False

    @property
    def missing(self) -> bool:
        """The case has no value (its cell is missing, or every sample is)."""
        return self.value is None

    @property
    def incomplete(self) -> bool:
        """The case has a value, but some of its samples have none."""
        return self.value is not None and self.n < self.samples


def key_of(mapping: Mapping[str, Any]) -> Key:
    """The hashable key of a ``{dim: key}`` dict (``dict(key_of(d)) == d``)."""
    items = tuple(mapping.items())
    return items if len(items) < 2 else tuple(sorted(items))


def label(key: Key) -> str:
    """A case or group key as text: the key alone for one dimension, else ``dim=key,...``."""
    if len(key) == 1:
        return str(key[0][1])
    return ",".join(f"{dim}={value}" for dim, value in key)


# --------------------------------------------------------------------------- cases


def case_scores(cells: Iterable[Mapping[str, Any]]) -> dict[Key, dict[Key, CaseScore]]:
    """Each case's score per group: the mean over its samples, and k/n with a verdict when binary.

    Args:
        cells: the evaluation's cells (see the module docstring).

    Returns:
        ``{group key: {case key: CaseScore}}``, groups and cases in the order of the cells.

    Raises:
        ValueError: a case that appears twice in one group, or a value that is not a finite
            number.
    """
    # Hot: a 10,000-case report must cost milliseconds. One pass sums each case and builds it
    # as if the score were binary, gathering every sample value; whether it is binary (or in
    # [0, 1]) is then one scan in C over them all, and only a non-binary eval is rebuilt.
    # (A column-wise version of this loop, with map(), chain() and compress(), measured slower.)
    cells = cells if isinstance(cells, list | tuple) else list(cells)
    out: dict[Key, dict[Key, CaseScore]] = {}
    groups: dict[tuple[tuple[str, Any], ...], dict[Key, CaseScore]] = {}
    every: list[Any] = []
    fsum, isfinite, new = math.fsum, math.isfinite, _new
    passed, failed, flaky = STABLE_PASS, STABLE_FAIL, FLAKY
    last_group: Any = None  # cells come grouped: an equal group dict is the same group
    cases: dict[Key, CaseScore] = {}
    for cell in cells:
        group = cell["group"]
        if group != last_group:
            items = tuple(group.items())
            held = groups.get(items)
            if held is None:
                held = groups[items] = out.setdefault(key_of(group), {})
            cases, last_group = held, group
        case = cell["case"]
        case = tuple(case.items()) if len(case) == 1 else tuple(sorted(case.items()))
        values = cell.get("values") or ()
        if cell.get("status") == "missing":
            cases[case] = new(CaseScore, (None, 0, len(values), None, None, True, True))
            continue
        try:
            total = fsum(values)
            present = values
        except (TypeError, OverflowError):
            present = [v for v in values if v is not None]
            total = _total(present, cell)
        n = len(present)
        if not n:
            cases[case] = new(CaseScore, (None, 0, len(values), None, None, True, True))
            continue
        if not isfinite(total):
            _total(present, cell)
        every += present
        k = int(total)
        verdict = passed if k == n else failed if k == 0 else flaky
        cases[case] = new(CaseScore, (total / n, n, len(values), k, verdict, True, True))
    if sum(len(cases) for cases in out.values()) != len(cells):
        _raise_duplicate(cells)
    if every and every.count(1.0) + every.count(0.0) == len(every):
        return out
    unit = bool(every) and min(every) >= 0 and max(every) <= 1
    for cases in out.values():
        for case, cs in cases.items():
            cases[case] = new(CaseScore, (cs[0], cs[1], cs[2], None, None, False, unit))
    return out


_new = tuple.__new__


def _raise_duplicate(cells: Iterable[Mapping[str, Any]]) -> None:
    seen: set[tuple[Key, Key]] = set()
    for cell in cells:
        group, case = key_of(cell["group"]), key_of(cell["case"])
        if (group, case) in seen:
            msg = (
                f"case {label(case)!r} appears twice in group {dict(group)!r}; "
                "give each case of a group one cell (its samples are its values)"
            )
            raise ValueError(msg)
        seen.add((group, case))


def _total(present: Sequence[Any], cell: Mapping[str, Any]) -> float:
    """The sum of a case's sample scores; a ``ValueError`` naming the case for a bad one."""
    try:
        total = math.fsum(present)
    except (TypeError, OverflowError):
        total = math.nan
    if not math.isfinite(total):
        bad = next(
            (v for v in present if not isinstance(v, int | float) or not math.isfinite(v)),
            present,
        )
        msg = (
            f"case {label(key_of(cell['case']))!r} of group {dict(cell['group'])!r} has the "
            f"score {bad!r}; scores must be finite numbers or bools (None for a missing sample)"
        )
        raise ValueError(msg)
    return total


_VALUE, _N, _SAMPLES, _K = (operator.itemgetter(i) for i in range(4))
_BINARY_FLAG, _UNIT_FLAG = operator.itemgetter(5), operator.itemgetter(6)


Scores = Mapping[Key, Mapping[Key, CaseScore]]
"""What :func:`case_scores` returns: ``{group key: {case key: CaseScore}}``."""


def _scores(cells: Iterable[Mapping[str, Any]] | Scores) -> Scores:
    return cells if isinstance(cells, Mapping) else case_scores(cells)


def _labels(keys: list[Key], clusters: Mapping[Key, Hashable] | None) -> list[Hashable] | None:
    if clusters is None:
        return None
    try:
        return [clusters[key] for key in keys]
    except KeyError as error:
        msg = (
            f"case {label(error.args[0])!r} has no cluster label; give every case a value of "
            "the cluster field (or do not cluster)"
        )
        raise ValueError(msg) from None


def _passed(mean: float | None, threshold: float | None, missing: int) -> bool:
    if threshold is None:
        return True
    if mean is None or missing:
        return False
    return mean >= threshold - _GATE_SLACK * max(1.0, abs(threshold))


def _clip(x: float | None, span: tuple[float, float] | None) -> float | None:
    if x is None or span is None:
        return x
    return min(span[1], max(span[0], x))


def _check_options(bounds: tuple[float, float] | None, confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        msg = f"confidence must lie strictly between 0 and 1 (e.g. 0.95), not {confidence!r}"
        raise ValueError(msg)
    if bounds is not None and not (len(bounds) == 2 and bounds[0] <= bounds[1]):
        msg = f"bounds must be a (low, high) pair with low <= high, not {bounds!r}"
        raise ValueError(msg)
