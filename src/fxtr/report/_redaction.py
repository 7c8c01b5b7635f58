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
import threading
from typing import Any, TextIO

from fxtr.secrets import redact

__all__ = ["RedactingStream", "redact_data", "redact_objects", "redacted_json"]


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


def redact_objects(value: Any) -> Any:
    """``value`` with credentials redacted from every string it holds, objects kept in place.

    For the structures another program renders later (pytest's failure representations, its
    captured sections): strings are redacted, lists and dicts in place, tuples rebuilt (named
    tuples too), and the fields of dataclass instances set to their redacted values. Other
    objects are left as they are.
    """
    return _redact_objects(value, set())


def _redact_objects(value: Any, seen: set[int]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, (bool, int, float, bytes)) or id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, list):
        value[:] = [_redact_objects(v, seen) for v in value]
    elif isinstance(value, dict):
        items = [(_redact_objects(k, seen), _redact_objects(v, seen)) for k, v in value.items()]
        value.clear()
        value.update(items)
    elif isinstance(value, tuple):
        parts = [_redact_objects(v, seen) for v in value]
        if any(a is not b for a, b in zip(parts, value, strict=True)):
            return type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for name, held in list(vars(value).items()):
            new = _redact_objects(held, seen)
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
                self.stream.write(redact(held[:cut]))
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
                self.stream.write(redact(held))
        self.stream.flush()

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal."""
        return self.stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
