"""One HTTP client per server, API key and event loop, shared by every model API made there.

Making an ``httpx.AsyncClient`` costs an SSL context (tens of milliseconds of CPU) and reads
the whole environment for proxy settings; a client made for each call blocked the event loop
and set off hermeticity notices for variables the user never read (issue 37 item 9). The
clients of a loop close when the loop shuts its async generators down (``asyncio.run`` and
pytest-asyncio's loops do): a small async generator started on the loop closes them then.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx


class _Pool:
    """The clients of one event loop, and the generator that closes them with it."""

    def __init__(self) -> None:
        self.clients: dict[tuple[str, str, float], httpx.AsyncClient] = {}
        self.closer = _close_at_shutdown(self)
        step: Any = self.closer.__anext__()  # registers the generator with the running loop...
        try:
            step.send(None)  # ...and runs it to its `yield`, so that its `finally` runs
        except StopIteration:
            pass


async def _close_at_shutdown(pool: _Pool) -> AsyncIterator[None]:
    try:
        yield
    finally:
        clients = list(pool.clients.values())
        pool.clients.clear()
        for client in clients:
            await client.aclose()


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = weakref.WeakKeyDictionary()


def shared_client(base_url: str, api_key: str | None, timeout: float) -> httpx.AsyncClient:
    """The client for this server and key on the running loop, made on first use."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = _Pool()
    digest = hashlib.sha256((api_key or "").encode()).hexdigest()  # not the key itself
    key = (base_url, digest, timeout)
    client = pool.clients.get(key)
    if client is None or client.is_closed:
        client = pool.clients[key] = httpx.AsyncClient(timeout=timeout)
    return client
