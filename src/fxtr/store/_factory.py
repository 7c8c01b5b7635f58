"""``open_store``: the store at a directory (diskcache) or a ``postgresql://`` URL."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from fxtr.store._base import StoreError, is_url

_OPEN: dict[str, Any] = {}


@atexit.register
def _close_all() -> None:
    """Close the stores this process opened (connections are not left to the collector)."""
    for store in list(_OPEN.values()):
        with contextlib.suppress(Exception):
            store.close()


_CONNINFO_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def url_without_password(url: str) -> str:
    """A database URL fit for a message: its password (in the user part or the query) hidden.

    ``postgresql://fxtr:PASSWORD@host/db`` becomes ``postgresql://fxtr:***@host/db``; a
    ``?password=...`` parameter and a ``password=...`` pair of a libpq connection string are
    hidden the same way.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.partition(':')[0]}:***@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(k.lower() == "password" for k, _ in pairs):
                hidden = [(k, "***" if k.lower() == "password" else v) for k, v in pairs]
                query = urlencode(hidden, safe="*")
        text = urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:  # not a URL at all: hide what follows a password=
        text = url
    return _CONNINFO_PASSWORD.sub(r"\1***", text)


def _passwords(url: str) -> list[str]:
    found: list[str] = []
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        if parts.password:
            found += {parts.password, unquote(parts.password)}
        found += [v for k, v in parse_qsl(parts.query) if k.lower() == "password" and v]
    return found


def _open_postgres(url: str) -> Any:
    """A ``PostgresStore``; a failure to connect is a ``StoreError``.

    The error names the URL without its password, and the password is registered as a
    credential, so nothing fxtr writes holds it.
    """
    from fxtr.secrets import redact, register
    from fxtr.store._postgres import PostgresStore

    passwords = _passwords(url)
    for password in passwords:
        register(password)
    try:
        return PostgresStore(url)
    except StoreError:
        raise
    except Exception as exc:
        import psycopg

        if not isinstance(exc, (psycopg.Error, OSError)):
            raise
        detail = redact(str(exc))
        for password in passwords:
            detail = detail.replace(password, "***")
        msg = (
            f"cannot open the PostgreSQL store at {url_without_password(url)}: "
            f"{type(exc).__name__}: {' '.join(detail.split())} (check that the server runs and "
            "that the URL's host, port, database, user and password, or the PG* variables, "
            "are right)"
        )
        raise StoreError(msg) from None


def open_store(location: Any) -> Any:
    """The store at a directory (diskcache) or a ``postgresql://`` URL.

    Opened once per process and location; a store object is returned as it is.

    Raises:
        StoreError: the store cannot be opened; the message names it (a URL without its
            password) and what to check.
    """
    if hasattr(location, "write") and hasattr(location, "get_entries"):
        return location
    if is_url(location):
        key = str(location)
        store = _OPEN.get(key)
        if store is None or store.closed:
            store = _OPEN[key] = _open_postgres(key)
        return store
    key = os.path.abspath(location)
    store = _OPEN.get(key)
    if store is None or store.closed:
        from fxtr.store._diskcache import DiskStore

        store = _OPEN[key] = DiskStore(key)
    return store
