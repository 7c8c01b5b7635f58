"""Capture of model calls made with the official ``openai`` and ``anthropic`` SDKs.

Every request of either SDK goes through its base client's ``request`` method
(``SyncAPIClient.request`` / ``AsyncAPIClient.request``, in openai 2.x on httpx and 3.x on
httpx2, and in anthropic 0.x on httpx and 1.x-2.x on httpx2), above the transport, the retry
loop and the ``with_raw_response`` flag, so hooking it sees each call once whatever the
transport, and sees the SDK's own error (``APIStatusError`` with status and body) after its
retries. OpenInference and inspect_ai hook the same method.

The hook returns what the SDK returned, the same object:

- a parsed object (``ChatCompletion``, ``Response``, ``Message``): read, returned;
- a stream (``Stream`` / ``AsyncStream``, also inside the ``.stream()`` helpers): its
  ``_iterator`` is wrapped so each event is read as the caller pulls it; the call is
  recorded when the stream ends (usage from its final events), fails, or is closed early;
- a raw response (``with_raw_response``): its JSON body is read when the SDK has read it;
  when the body is streamed, the response's ``parse()`` is wrapped to read what it returns.

Outside any step invocation or tracing block the hook is one check of two context variables.
``FXTR_CAPTURE=0`` in the environment when ``fxtr.tracing`` is imported installs nothing.

``run_in_executor`` and ``ThreadPoolExecutor.submit`` do not copy context variables into
the worker thread (``asyncio.to_thread`` does), so ``ThreadPoolExecutor.submit`` is wrapped
to carry fxtr's three recording variables (and only those) into the worker while a step or
tracing block runs: calls made there are attributed to the step that submitted them.
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib.abc
import importlib.util
import os
import sys
import threading
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

from fxtr.models._prices import cost_of_tokens
from fxtr.tracing._recorder import (
    CallRecord,
    begin_call,
    call_role,
    current_frame,
    current_invocation,
    hold_open,
    let_go,
)
from fxtr.tracing._sdk_calls import BodyReader, Reply, api_of, request_messages
from fxtr.tracing._sdk_wrappers import _aobserved, _observed, _read_raw_body, _wrapped_parse

SDKS = ("openai", "anthropic")
_installed = False
_seen_keys: set[str] = set()


def enabled() -> bool:
    """Whether capture is on (``FXTR_CAPTURE`` is not ``0``/``false``/``no``/``off``)."""
    return os.environ.get("FXTR_CAPTURE", "1").strip().lower() not in ("0", "false", "no", "off")


def install() -> None:
    """Hook the SDKs (now if imported, else when they are) and the thread pool. Idempotent."""
    global _installed
    if _installed or not enabled():
        return
    _installed = True
    _carry_context_into_thread_pools()
    for name in SDKS:
        module = sys.modules.get(name)
        if module is not None:
            patch_sdk(module)
    sys.meta_path.insert(0, _AfterImport({name: patch_sdk for name in SDKS}))


# import hook ----------------------------------------------------------------------------


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function on a top-level package right after it is first imported."""

    def __init__(self, hooks: dict[str, Callable[[ModuleType], None]]) -> None:
        self._hooks = hooks
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        hook = self._hooks.get(fullname)
        if hook is None or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, hook)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any, hook: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._hook = hook

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # the module keeps its own loader (importlib.resources and pickling look at it)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._hook(module)


# the SDKs' request method ---------------------------------------------------------------


class _SDK:
    """One SDK's model and stream classes, to recognise what ``request`` returned."""

    def __init__(self, name: str, base: ModuleType) -> None:
        streaming = sys.modules.get(f"{name}._streaming")
        models = sys.modules.get(f"{name}._models")
        self.name = name
        model = getattr(models, "BaseModel", None)
        self.models: tuple[type, ...] = (model,) if isinstance(model, type) else ()
        errors = sys.modules.get(f"{name}._exceptions")
        self.transport_errors = tuple(
            (cls, category)
            for cls, category in (
                (getattr(errors, "APITimeoutError", None), "timeout"),
                (getattr(errors, "APIConnectionError", None), "connection"),
            )
            if isinstance(cls, type)
        )
        """The SDK's own transport failures: a model call's, so ``unknown`` (DESIGN §3)."""
        self.streams = tuple(
            cls for cls in (getattr(streaming, "Stream", None),) if isinstance(cls, type)
        )
        self.async_streams = tuple(
            cls for cls in (getattr(streaming, "AsyncStream", None),) if isinstance(cls, type)
        )


def patch_sdk(module: ModuleType) -> None:
    """Wrap ``request`` of the SDK's sync and async base clients (once)."""
    name = module.__name__.partition(".")[0]
    base = sys.modules.get(f"{name}._base_client")
    if base is None:
        return
    sdk = _SDK(name, base)
    sync_client = getattr(base, "SyncAPIClient", None)
    async_client = getattr(base, "AsyncAPIClient", None)
    if sync_client is not None and not hasattr(sync_client.request, "__fxtr_original__"):
        sync_client.request = _sync_request(sync_client.request, sdk)
    if async_client is not None and not hasattr(async_client.request, "__fxtr_original__"):
        async_client.request = _async_request(async_client.request, sdk)


def unpatch_sdk(module: ModuleType) -> None:
    """Put the SDK's own ``request`` methods back (tests, benchmarks)."""
    base = sys.modules.get(f"{module.__name__.partition('.')[0]}._base_client")
    for cls_name in ("SyncAPIClient", "AsyncAPIClient"):
        cls = getattr(base, cls_name, None)
        original = getattr(getattr(cls, "request", None), "__fxtr_original__", None)
        if cls is not None and original is not None:
            cls.request = original


def _sync_request(original: Callable[..., Any], sdk: _SDK) -> Callable[..., Any]:
    @functools.wraps(original)
    def request(self: Any, cast_to: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
        if current_frame.get() is None and current_invocation.get() is None:
            return original(self, cast_to, options, *args, **kwargs)
        call = _Call.start(sdk, self, options)
        if call is None:
            return original(self, cast_to, options, *args, **kwargs)
        try:
            result = original(self, cast_to, options, *args, **kwargs)
        except BaseException as exc:
            call.raised(exc)
            raise
        return call.returned(result)

    request.__fxtr_original__ = original  # type: ignore[attr-defined]
    return request


def _async_request(original: Callable[..., Any], sdk: _SDK) -> Callable[..., Any]:
    @functools.wraps(original)
    async def request(self: Any, cast_to: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
        if current_frame.get() is None and current_invocation.get() is None:
            return await original(self, cast_to, options, *args, **kwargs)
        call = _Call.start(sdk, self, options)
        if call is None:
            return await original(self, cast_to, options, *args, **kwargs)
        try:
            result = await original(self, cast_to, options, *args, **kwargs)
        except BaseException as exc:
            call.raised(exc)
            raise
        return call.returned(result)

    request.__fxtr_original__ = original  # type: ignore[attr-defined]
    return request


# one call -------------------------------------------------------------------------------


class _Call:
    """One SDK call in flight: its record, the API it speaks, and what came back so far."""

    __slots__ = (
        "api",
        "api_url",
        "model",
        "reader",
        "record",
        "reply",
        "sdk",
        "streamed",
        "watch",
    )

    def __init__(
        self, sdk: _SDK, api: str, model: str, api_url: str, record: CallRecord, streamed: bool
    ) -> None:
        self.sdk = sdk
        self.streamed = streamed
        self.api = api
        self.model = model
        self.api_url = api_url
        self.record = record
        self.reply = Reply()
        self.reader: BodyReader | None = None
        """What the caller reads of a raw response's body, when it reads it raw."""
        self.watch: weakref.ref[Any] | None = None
        """A weak reference to the stream or raw response, to record it if it is dropped."""

    @classmethod
    def start(cls, sdk: _SDK, client: Any, options: Any) -> _Call | None:
        api = api_of(str(getattr(options, "method", "")), str(getattr(options, "url", "")))
        if api is None:
            return None
        body = getattr(options, "json_data", None)
        model = str(body.get("model") or "unknown") if isinstance(body, dict) else "unknown"
        _remember_key(getattr(client, "api_key", None))
        record = begin_call(
            model,
            provider=sdk.name,
            messages=request_messages(api, body),
            api=f"{sdk.name}.{api}",
        )
        if record is None:
            return None
        streamed = isinstance(body, dict) and body.get("stream") is True
        # the SDKs keep the URL in ``_base_url``; openai 3's ``base_url`` property imports a
        # module and calls a function to return it (~2 us a call)
        url = getattr(client, "_base_url", None) or getattr(client, "base_url", "")
        return cls(sdk, api, model, _url_text(url), record, streamed)

    # outcomes ---------------------------------------------------------------------------

    def raised(self, exc: BaseException) -> None:
        import asyncio

        if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)):
            self.record.cancel()
            return
        for cls, category in self.sdk.transport_errors:
            if isinstance(exc, cls):
                self.record.fail(exc, reason="unknown", category=category)
                return
        self.record.fail(exc)

    def returned(self, result: Any) -> Any:
        """Read or wrap what the SDK returned, and return that same object."""
        sdk = self.sdk
        if sdk.models and isinstance(result, sdk.models):
            self.reply.read(self.api, result)
            self.finish()
        elif sdk.streams and isinstance(result, sdk.streams):
            self._wrap_stream(result)
        elif sdk.async_streams and isinstance(result, sdk.async_streams):
            self._wrap_async_stream(result)
        elif hasattr(result, "http_response") and hasattr(result, "parse"):
            self._raw(result)
        else:
            self.reply.read(self.api, result)
            self.finish()
        return result

    def finish(
        self, *, closed_early: bool = False, why: str = "stream closed before its end"
    ) -> None:
        """Record the call with what was read (once); ``why`` says why it was cut short."""
        record = self.record
        if record.done:
            return
        if self.watch is not None:
            _watched.discard(self.watch)
            let_go(record)
        if self.reader is not None:
            self.reader.end()
        reply = self.reply
        usage: dict[str, Any] = {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cached_input_tokens": reply.cached,
            "cost": self._cost(),
        }
        extra: dict[str, Any] = {"stop_reason": reply.stop_reason}
        if not reply.usage_seen:
            extra["note"] = _NO_USAGE.get(self.api, "the provider reported no usage")
        declined = reply.declined
        if reply.error is not None:
            record.fail(StreamError(reply.error), reply=reply.text, **usage, **extra)
        elif declined is not None:
            # what fxtr.models counts as a failed call: the model declined inside a 200
            error = ModelDeclined(f"{declined}: {reply.text or reply.stop_reason}")
            record.fail(
                error, reply=reply.text, reason="refusal", category=declined, **usage, **extra
            )
        elif closed_early and not reply.finished:
            record.cancel(reply=reply.text, **usage, note=why)
        else:
            record.succeed(reply=reply.text, **usage, **extra)

    def _cost(self) -> float | None:
        if not self.reply.usage_seen:
            return None
        reply = self.reply
        return cost_of_tokens(
            self.model,
            reply.input_tokens,
            reply.output_tokens,
            reply.cached,
            reply.cache_writes,
            provider=self.sdk.name,
            api_url=self.api_url,
        )

    # streams ----------------------------------------------------------------------------

    def _wrap_stream(self, stream: Any) -> None:
        inner = stream._iterator
        stream._iterator = _observed(inner, self)
        self._watch(stream)

    def _wrap_async_stream(self, stream: Any) -> None:
        inner = stream._iterator
        stream._iterator = _aobserved(inner, self)
        self._watch(stream)

    def _watch(self, obj: Any) -> None:
        """Record the call as cut short if ``obj`` goes before the call's end.

        That is, when ``obj`` is garbage-collected, or when the step the call is made in ends.
        """
        self.watch = weakref.ref(obj, self._dropped)
        _watched.add(self.watch)
        hold_open(self.record, self._step_ended)

    def _step_ended(self) -> None:
        self.finish(closed_early=True, why="the step ended before the stream was read to its end")

    def _dropped(self, ref: weakref.ref[Any]) -> None:
        _watched.discard(ref)
        self.finish(closed_early=True)

    # raw responses ----------------------------------------------------------------------

    def _raw(self, response: Any) -> None:
        http = response.http_response
        if self.streamed or not hasattr(http, "_content"):
            # an event stream, or a body not read yet: read what parse() makes of it, or
            # the bytes the caller reads raw (iter_lines, iter_bytes) until it closes it
            response.parse = _wrapped_parse(response.parse, self)
            self.reader = BodyReader(self.reply, self.api, self.streamed)
            _read_raw_body(http, self)
            self._watch(response)
            return
        self.reply.read_json(self.api, http.content)
        self.finish()

    def parsed(self, result: Any) -> Any:
        if self.record.done:
            return result
        sdk = self.sdk
        if sdk.streams and isinstance(result, sdk.streams):
            self._wrap_stream(result)
        elif sdk.async_streams and isinstance(result, sdk.async_streams):
            self._wrap_async_stream(result)
        else:
            self.reply.read(self.api, result)
            self.finish()
        return result


_NO_USAGE = {
    "chat": "usage not reported: a chat stream reports it only with "
    "stream_options={'include_usage': True}",
}


_watched: set[weakref.ref[Any]] = set()
"""Weak references to streams not read to their end yet (kept alive here, not by the stream)."""


class StreamError(Exception):
    """An error the provider reported inside a stream that the SDK did not raise."""


class ModelDeclined(Exception):
    """The model refused, or a content filter stopped it, inside a 200 response.

    Recorded on the call's node only; the SDK's result reaches the caller unchanged.
    """


_urls: dict[int, tuple[Any, str]] = {}


def _url_text(url: Any) -> str:
    """``str(client.base_url)``, kept per URL object (httpx's ``URL.__str__`` is not free)."""
    entry = _urls.get(id(url))
    if entry is not None and entry[0] is url:
        return entry[1]
    text = str(url or "")
    if len(_urls) > 1024:
        _urls.clear()
    _urls[id(url)] = (url, text)
    return text


def _remember_key(key: Any) -> None:
    """The client's key is redacted from everything fxtr writes."""
    if isinstance(key, str) and key and key not in _seen_keys:
        from fxtr.secrets import register

        _seen_keys.add(key)
        register(key)


# threads --------------------------------------------------------------------------------


def _carry_context_into_thread_pools() -> None:
    pool = concurrent.futures.ThreadPoolExecutor
    if hasattr(pool.submit, "__fxtr_original__"):
        return
    original: Callable[..., Any] = pool.submit

    @functools.wraps(original)
    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        frame = current_frame.get()
        invocation = current_invocation.get()
        if frame is None and invocation is None:
            return original(self, fn, *args, **kwargs)
        scope = (frame, invocation, call_role.get())
        return original(self, _in_scope, scope, fn, *args, **kwargs)

    submit.__fxtr_original__ = original  # type: ignore[attr-defined]
    pool.submit = submit  # type: ignore[method-assign]


def _in_scope(scope: tuple[Any, Any, Any], fn: Callable[..., Any], /, *args: Any, **kw: Any) -> Any:
    """Run ``fn`` in a worker thread with the submitting step's recording variables."""
    frame, invocation, role = scope
    tokens = (current_frame.set(frame), current_invocation.set(invocation), call_role.set(role))
    try:
        return fn(*args, **kw)
    finally:
        call_role.reset(tokens[2])
        current_invocation.reset(tokens[1])
        current_frame.reset(tokens[0])
