"""What capture puts between an SDK's result and its caller, to read as the caller reads.

``_capture._Call`` decides what to wrap; these wrappers only pass each event, each body chunk
and each parse result on to the call (``reply``, ``reader``, ``finish``, ``raised``,
``parsed``) and return to the caller exactly what the SDK gave. Only ``_capture`` uses them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fxtr.tracing._capture import _Call


def _observed(inner: Iterator[Any], call: _Call) -> Iterator[Any]:
    reply, api = call.reply, call.api
    try:
        for event in inner:
            reply.event(api, event)
            yield event
    except GeneratorExit:
        close = getattr(inner, "close", None)
        if close is not None:
            close()
        call.finish(closed_early=True)
        raise
    except BaseException as exc:
        call.raised(exc)
        raise
    call.finish()


async def _aobserved(inner: AsyncIterator[Any], call: _Call) -> AsyncIterator[Any]:
    reply, api = call.reply, call.api
    try:
        async for event in inner:
            reply.event(api, event)
            yield event
    except GeneratorExit:
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            await aclose()
        call.finish(closed_early=True)
        raise
    except BaseException as exc:
        call.raised(exc)
        raise
    call.finish()


def _read_raw_body(http: Any, call: _Call) -> None:
    """Feed ``call.reader`` the body bytes the caller pulls; record the call at close.

    The response is closed when a ``with_streaming_response`` block ends.
    """
    reader = call.reader
    assert reader is not None
    feed = reader.feed
    if callable(getattr(http, "iter_bytes", None)):
        iter_bytes = http.iter_bytes

        @functools.wraps(iter_bytes)
        def read(*args: Any, **kwargs: Any) -> Iterator[bytes]:
            for chunk in iter_bytes(*args, **kwargs):
                feed(chunk)
                yield chunk

        http.iter_bytes = read
    if callable(getattr(http, "aiter_bytes", None)):
        aiter_bytes = http.aiter_bytes

        @functools.wraps(aiter_bytes)
        async def aread(*args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
            async for chunk in aiter_bytes(*args, **kwargs):
                feed(chunk)
                yield chunk

        http.aiter_bytes = aread
    why = "the response was closed before its body was read to its end"
    if callable(getattr(http, "close", None)):
        close = http.close

        @functools.wraps(close)
        def closed(*args: Any, **kwargs: Any) -> Any:
            try:
                return close(*args, **kwargs)
            finally:
                call.finish(closed_early=True, why=why)

        http.close = closed
    if callable(getattr(http, "aclose", None)):
        aclose = http.aclose

        @functools.wraps(aclose)
        async def aclosed(*args: Any, **kwargs: Any) -> Any:
            try:
                return await aclose(*args, **kwargs)
            finally:
                call.finish(closed_early=True, why=why)

        http.aclose = aclosed


def _wrapped_parse(parse: Callable[..., Any], call: _Call) -> Callable[..., Any]:
    @functools.wraps(parse)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if call.reader is not None:  # the SDK reads the body now: read what it makes of it
            call.reader.on = False
        try:
            result = parse(*args, **kwargs)
        except BaseException as exc:
            call.raised(exc)
            raise
        if inspect.isawaitable(result):
            return _aparsed(result, call)
        return call.parsed(result)

    return wrapper


async def _aparsed(awaitable: Any, call: _Call) -> Any:
    try:
        result = await awaitable
    except BaseException as exc:
        call.raised(exc)
        raise
    return call.parsed(result)
