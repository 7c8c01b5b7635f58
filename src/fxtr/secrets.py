"""Redaction of credentials from everything fxtr writes.

One function, :func:`redact`, is applied where text leaves the process: the store's records
and results, reports, the viewer, exports and fxtr's log records. It removes every occurrence
of a known credential in any of the forms it travels in:

- the value itself (``sk-proj-abc...``);
- the value without its provider prefix (``abc...``, as some gateways echo it);
- its base64 forms (standard and URL-safe, padded or not; of the value alone and of
  ``":" + value`` and ``value + ":"``, which is how HTTP Basic credentials carry a key);
- any base64 run whose decoded text holds a credential, whatever comes before or after it
  (HTTP Basic ``user:KEY``, ``Bearer KEY``, a JSON body): each run of base64 characters is
  decoded at each of the four alignments it may start at, and a run whose text holds a known
  credential (or anything shaped like a provider key) is redacted whole.

Known credentials are the values of environment variables whose names say they hold one
(``*_API_KEY``, ``*_API_TOKEN``, ``*_SECRET``, ``*_SECRET_KEY``, ``*_ACCESS_KEY``,
``*_AUTH_TOKEN``, plus a few providers' own names), and any value passed to :func:`register`
(model clients register the key they were given). Values shorter than 8 characters are not
treated as secrets (they would redact ordinary words). Besides exact values, anything shaped
like a provider key (``sk-...``, ``sk-ant-...``, ``Bearer ...``) is redacted too.

This module imports nothing from fxtr, so any layer may use it.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import threading
import time

REDACTED = "[redacted]"

_SECRET_NAME = re.compile(
    r"(_API_KEY|_APIKEY|_API_TOKEN|_SECRET|_SECRET_KEY|_ACCESS_KEY|_AUTH_TOKEN|_TOKEN)$"
)
_PREFIXES = ("sk-ant-api03-", "sk-ant-", "sk-proj-", "sk-or-v1-", "sk-", "gsk_", "xai-", "AIza")
_KEY_LIKE = re.compile(r"(sk-(?:ant-)?[A-Za-z0-9_\-\*]{6,}|Bearer\s+[^\s\"',;]+)")
_KEY_LIKE_STARTS = ("sk-", "Bearer")
"""What every match of ``_KEY_LIKE`` starts with (a test checks it): a text without them
has nothing key-shaped, which two substring searches tell faster than the pattern."""
_MIN_LENGTH = 8
_B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{12,}={0,2}")
"""A run of base64 characters (standard or URL-safe) long enough to hold an 8-character key."""
_URLSAFE = str.maketrans("-_", "+/")
_HEX_RUN = re.compile(r"[0-9a-f\-]+|[0-9A-F\-]+")

_registered: set[str] = set()
_lock = threading.Lock()
_cache: tuple[frozenset[str], tuple[re.Pattern[str] | None, re.Pattern[bytes]]] = (
    frozenset(),
    (None, re.compile(_KEY_LIKE.pattern.encode())),
)


def _fixed_characters(literal: bytes) -> list[str]:
    """The base64 characters that ``literal`` alone determines, at each byte alignment.

    Decoded base64 that holds ``literal`` at a byte offset ``a`` (mod 3) comes from
    characters among which are, in a row, those whose six bits all fall inside ``literal``'s
    bytes: these (standard alphabet) for ``a`` = 0, 1, 2. A base64 run whose decoding (at any
    of its alignments, URL-safe characters translated) holds ``literal`` therefore holds
    one of them, translated.
    """
    out = []
    for a in range(3):
        encoded = base64.b64encode(b"\0" * a + literal).decode()
        out.append(encoded[-(-8 * a // 6) : 8 * (a + len(literal)) // 6])
    return out


_HINTS_MAX = 16
"""Hints past which finding every run is the faster check (each hint is one search)."""


def _hints_for(plain: list[bytes]) -> tuple[str, ...] | None:
    """What a text must hold to hide one of ``plain``, or anything key-shaped, in base64.

    The characters each determines (``_fixed_characters``), to find in the text with its
    URL-safe characters translated. A form that holds another (a key holds itself without
    its prefix) needs no hints of its own. None where there would be more than
    ``_HINTS_MAX``.
    """
    literals = [*plain, *(start.encode() for start in _KEY_LIKE_STARTS)]
    least = [lit for lit in literals if not any(o != lit and o in lit for o in literals)]
    hints = {f for lit in least for f in _fixed_characters(lit)}
    return tuple(sorted(hints)) if len(hints) <= _HINTS_MAX else None


_hints: tuple[re.Pattern[bytes], tuple[str, ...] | None] = (_cache[1][1], _hints_for([]))
"""The decoded pattern of ``_patterns`` and the hints (``_hints_for``) of its credentials."""
_env_seen: tuple[float, frozenset[str]] = (-1.0, frozenset())
_ENV_REFRESH = 0.5
"""Seconds between two reads of the environment (redaction runs once per written record)."""


def register(value: str | None) -> None:
    """Treat ``value`` as a credential from now on (in this process)."""
    global _env_seen
    if value and len(value) >= _MIN_LENGTH:
        with _lock:
            _registered.add(value)
            _env_seen = (-1.0, _env_seen[1])


def _env_secrets() -> set[str]:
    """The credentials in the environment.

    Read through ``os.environb`` where there is one: reading ``os.environ`` inside a step is
    what the hermeticity watcher notices (and logs, and a log record is redacted, which would
    come back here), and redacting is not the step reading its environment.
    """
    if os.supports_bytes_environ:
        items = [(os.fsdecode(k), os.fsdecode(v)) for k, v in os.environb.items()]
    else:  # pragma: no cover - Windows
        items = list(os.environ.items())
    return {
        value
        for name, value in items
        if value and len(value) >= _MIN_LENGTH and _SECRET_NAME.search(name.upper())
    }


def variants(value: str) -> set[str]:
    """Every form of ``value`` that :func:`redact` removes."""
    forms = {value}
    for prefix in _PREFIXES:
        if value.startswith(prefix) and len(value) - len(prefix) >= _MIN_LENGTH:
            forms.add(value[len(prefix) :])
            break
    for raw in (value, ":" + value, value + ":"):
        data = raw.encode()
        for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
            text = encoded.decode()
            forms.add(text)
            forms.add(text.rstrip("="))
    return {form for form in forms if len(form) >= _MIN_LENGTH}


_Patterns = tuple[re.Pattern[str] | None, re.Pattern[bytes]]


def _patterns() -> _Patterns:
    """Two patterns: every form of the known credentials, and the decoded base64 one.

    The second is what a decoded base64 run is searched with: the credentials as they are and
    without their prefix, and anything shaped like a provider key.
    """
    global _cache, _env_seen, _hints
    now = time.monotonic()
    fresh = frozenset(_env_secrets()) if now - _env_seen[0] > _ENV_REFRESH else None
    with _lock:  # nothing under the lock logs or reads the environment
        if fresh is not None:
            _env_seen = (now, fresh)
        secrets = _env_seen[1] | _registered
        if secrets == _cache[0]:
            return _cache[1]
        forms: set[str] = set()
        plain: set[str] = set()
        for value in secrets:
            forms |= variants(value)
            plain |= {f for f in variants(value) if f == value or value.endswith(f)}
        ordered = sorted(forms, key=len, reverse=True)
        compiled = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        texts = [re.escape(f.encode()) for f in sorted(plain, key=len, reverse=True)]
        decoded = re.compile(b"|".join([*texts, _KEY_LIKE.pattern.encode()]))
        _cache = (secrets, (compiled, decoded))
        _hints = (decoded, _hints_for([f.encode() for f in plain]))
        return _cache[1]


def _pattern() -> re.Pattern[str] | None:
    return _patterns()[0]


def _decodings(run: str) -> list[bytes]:
    """The bytes a base64 run decodes to, at each of the four alignments it may start at."""
    body = run.rstrip("=").translate(_URLSAFE)
    found = []
    for offset in range(4):
        chunk = body[offset:]
        rest = len(chunk) % 4
        if rest == 1:  # a last character that holds no whole byte
            chunk, rest = chunk[:-1], 0
        try:
            found.append(binascii.a2b_base64(chunk + "=" * (-rest % 4), strict_mode=True))
        except (binascii.Error, ValueError):
            continue
    return found


def _hides_secret(run: str, decoded: re.Pattern[bytes]) -> bool:
    """Whether a base64 run decodes to text holding a credential.

    A run of hexadecimal digits (and dashes) is a digest or an id, never checked: base64 of
    text always holds a character outside them (the first of every four encodes the top bits
    of a printable byte), unless each third character of that text is one of ``k o s w {``.
    """
    if _HEX_RUN.fullmatch(run):
        return False
    return any(decoded.search(data) for data in _decodings(run))


_RUNS_SEEN_MAX = 65_536
"""Base64 runs whose verdict :func:`redact` remembers before it starts afresh."""
_runs_seen: tuple[re.Pattern[bytes] | None, dict[str, bool]] = (None, {})


def _verdicts(decoded: re.Pattern[bytes]) -> dict[str, bool]:
    """Whether each base64 run seen hides a credential, for the credentials known now.

    A record's runs repeat from record to record (field names, addresses, ids): each is
    decoded once. The verdicts belong to one ``decoded`` pattern, which is compiled anew
    whenever the known credentials change, so a new credential is never judged by an old
    verdict.
    """
    global _runs_seen
    pattern, seen = _runs_seen
    if pattern is not decoded or len(seen) >= _RUNS_SEEN_MAX:
        seen = {}
        _runs_seen = (decoded, seen)
    return seen


def _may_hide(text: str, decoded: re.Pattern[bytes]) -> bool:
    """False where no base64 run of ``text`` can decode to what ``decoded`` finds.

    A few substring searches (``_hints``) instead of finding every run: most texts written
    (records of digests, ids and words) hold none of the hints.
    """
    pattern, hints = _hints
    if pattern is not decoded or hints is None:  # no shortcut
        return True
    text = text.replace("-", "+").replace("_", "/")  # the URL-safe alphabet translated
    return any(hint in text for hint in hints)


def _redact_base64(text: str, decoded: re.Pattern[bytes]) -> str:
    # the runs are found in C and each distinct one checked once (and remembered across
    # texts: see ``_verdicts``); only a text with a run that hides a credential is rewritten
    # (most texts hold digests and words only, and most of those none of the hints)
    if not _may_hide(text, decoded):
        return text
    seen = _verdicts(decoded)
    hiding = set()
    for run in set(_B64_RUN.findall(text)):
        hides = seen.get(run)
        if hides is None:
            hides = seen[run] = _hides_secret(run, decoded)
        if hides:
            hiding.add(run)
    if not hiding:
        return text
    return _B64_RUN.sub(lambda m: REDACTED if m.group(0) in hiding else m.group(0), text)


_URL_PASSWORD = re.compile(r"(://[^\s/@:?#\[\]]*):([^\s/@?#]+)@")
"""The password in a URL's userinfo (``https://user:PASSWORD@host``)."""
_HIDDEN = ("***", REDACTED)


def _url_password(match: re.Match[str]) -> str:
    if match.group(2) in _HIDDEN:
        return match.group(0)
    return f"{match.group(1)}:{REDACTED}@"


def redact(text: str) -> str:
    """``text`` with every known credential (in any of its forms) replaced by ``[redacted]``.

    The password of any URL's userinfo (``https://user:PASSWORD@host``, as in
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` or a database URL) is one too, known or not.
    """
    if not text:
        return text
    if "@" in text and "://" in text:
        text = _URL_PASSWORD.sub(_url_password, text)
    pattern, decoded = _patterns()
    text = _redact_base64(text, decoded)
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    if not any(start in text for start in _KEY_LIKE_STARTS):
        return text
    return _KEY_LIKE.sub(REDACTED, text)


def contains_secret(text: str) -> bool:
    """Whether ``text`` holds a known credential in any of its forms."""
    pattern, decoded = _patterns()
    if pattern is None:
        return False
    if pattern.search(text):
        return True
    return any(_hides_secret(m.group(0), decoded) for m in _B64_RUN.finditer(text))


class RedactingFilter(logging.Filter):
    """A logging filter that redacts credentials from a record's message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the record's message redacted (arguments included); keep the record."""
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error handling
            return True
        record.msg = redact(message)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install_log_filter(logger_name: str = "fxtr") -> None:
    """Redact credentials from every record of ``logger_name`` (idempotent)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())
