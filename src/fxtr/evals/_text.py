"""Pure scoring rules over (answer, targets), with inspect_ai's semantics where it has the name.

Each function takes the model's completion and the case's targets and returns the value and
the answer it extracted. The rules follow inspect_ai 0.3.x (``inspect_ai/scorer/``): ``exact``
and ``f1`` use SQuAD-style normalisation (casefold, punctuation, articles, numbers), ``match``
compares stripped ends, ``includes`` looks for a substring, ``pattern`` extracts with a regex,
``choice`` parses an ``ANSWER: X`` line. ``tests/test_scorers_parity.py`` checks the values
against inspect_ai's on the corpus in ``tests/data/scorers/``.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

_EDGE = string.whitespace + string.punctuation
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_TOKEN_SPLIT = re.compile(" |-")


def is_finite_number(text: str) -> bool:
    """Whether Python's ``float`` reads ``text`` as a finite number."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def strip_edge_punctuation(text: str) -> str:
    """``text`` without whitespace and ASCII punctuation at either end."""
    return text.strip(_EDGE)


# --- SQuAD-style normalisation (exact, f1) ----------------------------------------------


def _without_punctuation(token: str) -> str:
    if is_finite_number(token):
        return token
    edges_off = strip_edge_punctuation(token)
    if is_finite_number(edges_off):
        return edges_off  # "(3.14)" and "3.14." are numbers once their edges go
    return "".join(ch for ch in token if ch not in string.punctuation)


def _normal_token(token: str) -> str:
    token = _without_punctuation(token.casefold())
    if is_finite_number(token):
        token = str(float(token))  # "1" and "1.0" are the same word
    token = _ARTICLES.sub(" ", token)
    return " ".join(token.split())


def normalize(text: str) -> str:
    """SQuAD-style normal form of a text.

    Tokens split at spaces and hyphens, each casefolded, unpunctuated, numbers as floats,
    articles dropped; the non-empty ones joined by single spaces.
    """
    tokens = (_normal_token(t) for t in _TOKEN_SPLIT.split(text))
    return " ".join(t for t in tokens if t.strip()).strip()


def exact_value(answer: str, targets: Sequence[str]) -> float:
    """1.0 when the normalised answer equals a target's.

    A target empty once normalised (such as ``"the"``) never matches.
    """
    mine = normalize(answer)
    return 1.0 if any((t := normalize(target)) and t == mine for target in targets) else 0.0


def _word_counts(text: str) -> Counter[str]:
    return Counter(normalize(text).split())


def _f1(answer: Counter[str], target: Counter[str]) -> float:
    common = sum((answer & target).values())
    precision = common / sum(answer.values()) if answer else 1.0
    recall = common / sum(target.values()) if target else 1.0
    if precision == 0.0 and recall == 0.0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def f1_value(answer: str, targets: Sequence[str]) -> float:
    """The best bag-of-words F1 over the targets with words, rounded to two places."""
    words = _word_counts(answer)
    best = 0.0
    for target in targets:
        target_words = _word_counts(target)
        if target_words:
            best = max(best, _f1(words, target_words))
    return round(best, 2)


# --- substring and edge matches ---------------------------------------------------------


def includes_value(answer: str, targets: Sequence[str], *, ignore_case: bool) -> float:
    """1.0 when a target is a substring of the answer."""
    text = answer.casefold() if ignore_case else answer
    for target in targets:
        if (target.casefold() if ignore_case else target) in text:
            return 1.0
    return 0.0


LOCATIONS = ("begin", "end", "any", "exact")


def match_value(answer: str, targets: Sequence[str], *, location: str, ignore_case: bool) -> float:
    """1.0 when a target sits at ``location`` of the answer.

    Both are stripped of whitespace and edge punctuation (and casefolded with
    ``ignore_case``).
    """
    text = answer.strip()
    if ignore_case:
        text = text.casefold()
    text = strip_edge_punctuation(text)
    for target in targets:
        t = target.strip()
        if ignore_case:
            t = t.casefold()
        t = strip_edge_punctuation(t)
        if location == "begin":
            hit = text.startswith(t)
        elif location == "end":
            hit = text.endswith(t)
        elif location == "exact":
            hit = text == t
        else:
            hit = t in text
        if hit:
            return 1.0
    return 0.0


# --- regex extraction -------------------------------------------------------------------


def _same(found: str, targets: Sequence[str], ignore_case: bool) -> bool:
    if ignore_case:
        return found.lower() in [t.lower() for t in targets]
    return found in targets


def pattern_value(
    answer: str, targets: Sequence[str], *, regex: str, ignore_case: bool, match_all: bool
) -> tuple[float, str | None]:
    """Extract with ``regex`` and compare with the targets.

    The extract is its groups, or the whole match without groups; any group (or, with
    ``match_all``, every group) must equal a target.
    """
    found = re.search(regex, answer, re.IGNORECASE if ignore_case else 0)
    if found is None:
        return 0.0, None
    groups = [g for g in (found.groups() or (found.group(0),)) if isinstance(g, str)]
    if match_all:
        ok = bool(groups) and all(_same(g, targets, ignore_case) for g in groups)
        extracted: str | None = "".join(targets) if ok else None
    else:
        extracted = next((g for g in groups if _same(g, targets, ignore_case)), None)
        all_groups = found.groups() or (found.group(0),)
        if extracted is None and len(all_groups) == 1:
            return 0.0, all_groups[0]  # the failed extraction is worth showing
    return (1.0 if extracted else 0.0), extracted


# --- multiple choice --------------------------------------------------------------------


def letter(index: int) -> str:
    """The label of choice ``index``: A..Z, then 1, 2, ..."""
    return chr(ord("A") + index) if index < 26 else str(index - 25)


def index_of(label: str) -> int:
    """The index of a choice label (``A`` → 0; ``1`` → 26).

    Raises:
        ValueError: not a letter or a positive number.
    """
    if len(label) == 1 and label.isalpha():
        return ord(label.upper()) - ord("A")
    if label.isnumeric() and int(label) != 0:
        return 25 + int(label)
    msg = f"{label!r} is not a choice label (a letter, or a number from 1)."
    raise ValueError(msg)


_DOLLARS = re.compile(r"\$\s*([A-Za-z\d][A-Za-z\d ,]*?)\s*\$")
_BOLD = re.compile(r"\*\*\s*([A-Za-z\d][A-Za-z\d ,]*?)\s*\*\*")
_PARENS = re.compile(r"(?i)(^|[:,])(\s*)\(([A-Za-z\d])\)(?=\s*(?:,|\.|\n|\Z))")
_ANSWER_LINE = re.compile(r"(?i)^ANSWER\s*:\s*([A-Za-z\d ,]+)\s*(?:$|\n|\.)", re.MULTILINE)
_ANSWER_ANYWHERE = re.compile(r"(?i)ANSWER\s*:\s*([A-Za-z\d ,]+)(?:[^\w]|\n|$|\.)")


def parse_choice_answer(completion: str, n_choices: int, *, multiple: bool) -> set[str]:
    """The labels a completion picks with its last ``ANSWER: ...``.

    ``$A$``, ``**A**`` and ``(A)`` are unwrapped; an answer on a line of its own is
    preferred; empty when there is no valid pick.
    """
    text = _DOLLARS.sub(r"\1", completion)
    text = _BOLD.sub(r"\1", text)
    text = _PARENS.sub(r"\1\2\3", text)
    picks = _ANSWER_LINE.findall(text) or _ANSWER_ANYWHERE.findall(text)
    if not picks:
        return set()
    picked = picks[-1].strip().rstrip(".").upper()
    allowed = {letter(i) for i in range(n_choices)}
    if multiple:
        picked = picked.replace(" AND ", ",").replace(" ", "")
        by_comma = {x for x in picked.split(",") if x}
        if by_comma <= allowed:
            return by_comma
        by_char = set(picked)
        return by_char if by_char <= allowed else set()
    tokens = [x for x in picked.split(",") if x]
    return {tokens[0]} if len(tokens) == 1 and tokens[0] in allowed else set()


def target_positions(targets: Sequence[str], n_choices: int) -> list[int]:
    """Choice indices a target names (``"A"``, ``"A, C"``, ``"AC"``, ``"27"``).

    Raises:
        ValueError: a target names a choice the case does not have.
    """
    labels: list[str] = []
    for target in targets:
        for token in target.replace(",", " ").split():
            labels.extend([token] if token.isnumeric() else list(token))
    positions = [index_of(label) for label in labels]
    beyond = [label for label, p in zip(labels, positions, strict=True) if p >= n_choices]
    if beyond:
        msg = (
            f"The target names choice(s) {', '.join(beyond)} but the case has {n_choices} "
            "choices: fix the target or add the choices."
        )
        raise ValueError(msg)
    return positions


def choice_value(
    completion: str, targets: Sequence[str], n_choices: int, *, multiple: bool
) -> tuple[float, str]:
    """1.0 when the picked choices are exactly the target's; the answer lists the picks."""
    picked = parse_choice_answer(completion, n_choices, multiple=multiple)
    chosen = sorted({p for label in picked if (p := _safe_index(label)) is not None})
    answer = ", ".join(letter(i) for i in chosen)
    return (1.0 if chosen == sorted(target_positions(targets, n_choices)) else 0.0), answer


def _safe_index(label: str) -> int | None:
    try:
        return index_of(label)
    except ValueError:
        return None


# --- numbers ----------------------------------------------------------------------------

_NUMBER = re.compile(r"[-+\u2212]?(?:\d[\d,_]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text``, in order (``1,234.5``, ``-3``, ``2e6``)."""
    found: list[float] = []
    for raw in _NUMBER.findall(text.replace("$", "").replace("€", "").replace("£", "")):
        cleaned = raw.replace(",", "").replace("_", "").replace("\u2212", "-")
        try:
            value = float(cleaned)
        except ValueError:
            continue
        if math.isfinite(value):
            found.append(value)
    return found


def numeric_value(answer: str, targets: Sequence[str], *, tolerance: float) -> tuple[float, str]:
    """1.0 when the last number in the answer is within ``tolerance`` of a target number.

    Raises:
        ValueError: a target is not a number.
    """
    wanted = []
    for target in targets:
        values = numbers_in(target)
        if len(values) != 1:
            msg = f"numeric() needs targets that are one number each, got {target!r}."
            raise ValueError(msg)
        wanted.append(values[0])
    numbers = numbers_in(answer)
    if not numbers:
        return 0.0, ""
    last = numbers[-1]
    ok = any(abs(last - w) <= tolerance for w in wanted)
    return (1.0 if ok else 0.0), format(last, "g")
