"""Hermeticity notices: files and environment variables a step or workflow body touches.

While a body runs, a context variable points at its record's ``warnings`` list. A Python
audit hook (``sys.addaudithook``) sees every ``open``; a wrapper on ``os.environ``'s item
lookup sees environment reads. Both return at once when no body is being watched, so the
cost outside bodies is one context-variable lookup per audited event.

Not notices: imports (``.py``/``.pyc``/extension files, anything under the interpreter's
prefixes), the fxtr store itself, device and ``/proc`` files, model-provider credentials and
variables that libraries read for transport (proxies, certificates, locale). Nor anything
read *while a module is being imported* (a library's import-time settings, such as
pydantic's ``PYDANTIC_DISABLE_PLUGINS``, read by an ``import`` inside a step), nor by the
libraries *below a model SDK* (the openai SDK's platform headers read ``/etc/os-release``,
``SHELL``, ``PATH``...): the frames that led to the read are looked at, and a read with an
import or a model SDK among them is not the user's. A step's own ``os.environ[...]`` or
``open(...)`` still is.
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import sys
import sysconfig
from typing import Any

log = logging.getLogger("fxtr.hermetic")

watching: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "fxtr_hermetic_watch", default=None
)
"""The warnings list of the body running now, when hermeticity is watched."""

_IGNORED_PREFIXES: list[str] = [
    *sorted(
        {
            os.path.realpath(p)
            for p in (
                sys.prefix,
                sys.base_prefix,
                sys.exec_prefix,
                *(sysconfig.get_paths().values()),
            )
            if p
        }
    ),
    *("/dev/", "/proc/", "/sys/", "/etc/ssl/", "/usr/share/zoneinfo", "/etc/localtime"),
]
_IGNORED_SUFFIXES = (".py", ".pyc", ".pyo", ".so", ".pyd", ".pth", ".dist-info", ".egg-link")
_STORE_ROOTS: set[str] = set()
_ENV_ALLOWED = re.compile(
    r"^(.*_API_KEY|.*_API_TOKEN|.*_BASE_URL|OPENAI_.*|ANTHROPIC_.*|AZURE_OPENAI_.*|"
    r"(HTTPS?|ALL|NO)_PROXY|(https?|all|no)_proxy|SSL_CERT_(FILE|DIR)|REQUESTS_CA_BUNDLE|"
    r"CURL_CA_BUNDLE|LANG|LC_.*|TZ|HOME|TMPDIR|TEMP|TMP|PYTHON.*|FXTR_.*|PYTEST_.*)$"
)
_installed = False

MODEL_SDKS = frozenset(
    {"openai", "anthropic", "google", "mistralai", "cohere", "groq", "litellm", "httpx"}
)
"""Top-level packages of model SDKs, and httpx (a client reads the whole environment for its
proxies): what they and the libraries below them read is theirs."""
_IMPORTING = "<frozen importlib._bootstrap"
"""How the import machinery's frames name their file (``_bootstrap`` and ``_external``)."""
MAX_FRAMES = 200
"""Frames looked at above a read (a step's body is far fewer frames below its task)."""


def _not_the_users(frame: Any) -> bool:
    """Whether a read, made from ``frame``, comes from an import or from below a model SDK."""
    seen = 0
    while frame is not None and seen < MAX_FRAMES:
        code = frame.f_code
        if code.co_filename.startswith(_IMPORTING):
            return True
        name = frame.f_globals.get("__name__")
        if isinstance(name, str) and name.partition(".")[0] in MODEL_SDKS:
            return True
        frame = frame.f_back
        seen += 1
    return False


def register_store(path: str | os.PathLike[str]) -> None:
    """Files under a store are the record itself, never a notice."""
    _STORE_ROOTS.add(os.path.realpath(path))


def _note(target: list[str], message: str) -> None:
    if message not in target:
        target.append(message)
        log.info("hermeticity: %s", message)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open":
        return
    target = watching.get()
    if target is None:
        return
    path, mode = args[0], args[1]
    if not isinstance(path, (str, bytes)) or isinstance(path, bytes):
        return
    if path.endswith(_IGNORED_SUFFIXES):
        return
    real = os.path.realpath(path)
    if any(real.startswith(p) for p in _IGNORED_PREFIXES) or any(
        real.startswith(p) for p in _STORE_ROOTS
    ):
        return
    if _not_the_users(sys._getframe(1)):
        return
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
        flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND)
    )
    if writes:
        _note(target, f"wrote file {path!r} (write only through the result or stored entities)")
    else:
        _note(target, f"read local file {path!r} (read it in the launcher and pass it as an input)")


def _wrap_environ() -> None:
    cls = type(os.environ)
    original = cls.__getitem__

    def __getitem__(self: Any, key: str) -> Any:
        target = watching.get()
        if (
            target is not None
            and self is os.environ
            and not _ENV_ALLOWED.match(str(key))
            and not _not_the_users(sys._getframe(1))
        ):
            _note(
                target,
                f"read environment variable {key!r} (pass settings as inputs; only provider "
                "credentials belong in the environment)",
            )
        return original(self, key)

    cls.__getitem__ = __getitem__  # type: ignore[method-assign]


def install() -> None:
    """Install the audit hook and the environment wrapper, once per process."""
    global _installed
    if _installed:
        return
    _installed = True
    sys.addaudithook(_audit)
    _wrap_environ()
