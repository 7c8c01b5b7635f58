"""Credentials kept out of everything the ``fxtr`` command and the viewer write.

Records may hold a provider key (an SDK error that echoes it, a log line). Each output path
passes through one function here: :func:`redacted_json` for JSON (``fxtr export``, the
viewer's responses, the HTML export's data blocks, ``--json`` listings) and
:class:`RedactingStream` for the command's text on stdout and stderr. Both apply
:func:`fxtr.secrets.redact`, which knows every form a key travels in (raw, without its
prefix, base64).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable
from typing import Any, TextIO

from fxtr.secrets import redact

__all__ = [
    "RedactingStream",
    "escape_controls",
    "redact_data",
    "redact_objects",
    "redacted_json",
    "terminal_safe",
]

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters (C0, DEL, C1) and Unicode's line and paragraph separators."""
_LINE_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
"""The same, but for the line feed and the tab, which a multi-line text keeps."""
_COMMAND = re.compile(r"^(\s*)::", re.MULTILINE)
"""A line that a CI runner would read as a workflow command (``::error::...``)."""


def _escaped(match: re.Match[str]) -> str:
    return match.group(0).encode("unicode_escape").decode("ascii")


def escape_controls(text: str) -> str:
    r"""A one-line text (a case id, an error) with its control characters escaped.

    A line feed becomes the two characters ``\n``, ESC ``\x1b``, as pytest escapes the ids it
    makes (``_idval``): nothing in it can start a line, move the cursor or colour the
    terminal. Printed text also goes through :func:`terminal_safe` (a line of its own that
    starts with ``::``).
    """
    if _CONTROLS.search(text) is not None:
        text = _CONTROLS.sub(_escaped, text)
    return text


def terminal_safe(text: str) -> str:
    r"""Text for a terminal or a CI log, its lines kept, nothing in it a command.

    Control characters other than the line feed and the tab are escaped
    (:func:`escape_controls`), and a line that starts with ``::`` (after blanks) gets a
    ``\`` in front: a GitHub Actions runner reads such a line as a workflow command
    (``::error::``, ``::add-mask::``), whatever text put it there.
    """
    if _LINE_CONTROLS.search(text) is not None:
        text = _LINE_CONTROLS.sub(_escaped, text)
    if "::" in text:
        text = _COMMAND.sub(lambda m: "\\" + m.group(0), text)
    return text


def redact_data(data: Any) -> Any:
    """``data`` (a JSON-like tree) with credentials redacted from every string, keys too.

    Objects JSON cannot hold are turned into their ``str`` first, as ``default=str`` would.
    """
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {(redact(k) if isinstance(k, str) else k): redact_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v) for v in data]
    if data is None or isinstance(data, (bool, int, float)):
        return data
    return redact(str(data))


def redact_objects(value: Any, clean: Callable[[str], str] = redact) -> Any:
    """``value`` with credentials redacted from every string it holds, objects kept in place.

    For the structures another program renders later (pytest's failure representations, its
    captured sections): strings are redacted, lists and dicts in place, tuples rebuilt (named
    tuples too), and the fields of dataclass instances set to their redacted values. Other
    objects are left as they are. ``clean`` is what each string goes through (another
    cleaning, such as :func:`terminal_safe`, walks the same way).
    """
    return _redact_objects(value, set(), clean)


def _redact_objects(value: Any, seen: set[int], clean: Callable[[str], str] = redact) -> Any:
    if isinstance(value, str):
        return clean(value)
    if value is None or isinstance(value, (bool, int, float, bytes)) or id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, list):
        value[:] = [_redact_objects(v, seen, clean) for v in value]
    elif isinstance(value, dict):
        items = [
            (_redact_objects(k, seen, clean), _redact_objects(v, seen, clean))
            for k, v in value.items()
        ]
        value.clear()
        value.update(items)
    elif isinstance(value, tuple):
        parts = [_redact_objects(v, seen, clean) for v in value]
        if any(a is not b for a, b in zip(parts, value, strict=True)):
            return type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for name, held in list(vars(value).items()):
            new = _redact_objects(held, seen, clean)
            if new is not held:
                object.__setattr__(value, name, new)
    return value


def redacted_json(data: Any, *, indent: int | None = None) -> str:
    """JSON text of ``data`` with no credential in it (non-JSON objects as their ``str``).

    The text is searched once; only when it holds a credential is the tree walked and
    redacted string by string, so that a replacement never cuts through a JSON escape and the
    common case costs one regular-expression pass. Non-ASCII text is written as is (the
    search sees the characters the strings hold); only a credential holding a quote, a
    backslash or a control character (which JSON escapes) could escape the search.
    """
    text = json.dumps(data, indent=indent, default=str, ensure_ascii=False)
    if redact(text) == text:
        return text
    return json.dumps(redact_data(data), indent=indent, ensure_ascii=False)


class RedactingStream:
    """A text stream that writes whole lines through :func:`fxtr.secrets.redact`.

    And through :func:`terminal_safe`: no escape code or CI workflow command (``::error::``)
    reaches the terminal or a CI log from a record's text.

    Text is held until its line ends (a key split across two ``write`` calls is still found);
    :meth:`flush` writes what is held. :meth:`write_verbatim` bypasses redaction for text
    already redacted as data (JSON from :func:`redacted_json`, which a line-wise pass could
    corrupt at an escape).
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._held = ""
        self._lock = threading.Lock()  # the viewer's threads log to stderr

    def write(self, text: str) -> int:
        """Write the complete lines of what is held plus ``text``, redacted."""
        with self._lock:
            held = self._held + text
            cut = held.rfind("\n") + 1
            self._held = held[cut:]
            if cut:
                self.stream.write(terminal_safe(redact(held[:cut])))
        return len(text)

    def write_verbatim(self, text: str) -> None:
        """Write text that is already free of credentials (after what is held)."""
        self.flush()
        self.stream.write(text)

    def flush(self) -> None:
        """Write what is held (a line without its end), redacted, and flush the stream."""
        with self._lock:
            held, self._held = self._held, ""
            if held:
                self.stream.write(terminal_safe(redact(held)))
        self.stream.flush()

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal."""
        return self.stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
