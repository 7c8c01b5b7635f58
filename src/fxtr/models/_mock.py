"""``MockModelAPI``: the offline model for evals and tests, with scripted replies and failures."""

from __future__ import annotations

import ast
import asyncio
import functools
import hashlib
import inspect
import itertools
import json
import re
import textwrap
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fxtr.models._budget import spending
from fxtr.models._observe import observe
from fxtr.models._prices import cost_of, has_price
from fxtr.models._types import (
    AssistantMessage,
    ContentText,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

Answer = str | ToolCall | Sequence[str | ToolCall] | ModelResponse | ModelCallFailure
"""What a reply callable may return: text, a tool call, several (parallel calls), a reply."""
Reply = str | Sequence[str] | Callable[[ModelRequest], Answer]


_CODE: dict[str, str] = {}
"""The digest of the reply of the latest ``MockModelAPI`` made in this process, by name."""


def reply_digest(reply: Reply) -> str:
    """A digest of what a mock answers with: its strings, or its reply function's code.

    For a function: its syntax tree (comments, formatting and docstrings aside), the values
    it closes over and its defaults, and the module globals it names that are data (texts,
    numbers, lists, dicts, compiled patterns) or functions of its own module (their code, in
    turn). Editing any of them changes the digest; so does editing the line a lambda is on.
    """
    h = hashlib.sha256()
    if isinstance(reply, str):
        parts: Iterator[str] = iter(["str", reply])
    elif callable(reply):
        parts = _code_parts(reply, getattr(reply, "__module__", None), set())
    else:
        parts = iter(["list", json.dumps(list(reply))])
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:16]


def code_changed(code: dict[str, str]) -> list[str]:
    """The models among ``code`` (``"mock/NAME": digest``) whose reply differs now.

    A mock this process has not made (yet) is not known to differ.
    """
    out = []
    for name, digest in code.items():
        provider, _, model = name.partition("/")
        now = _CODE.get(model) if provider == "mock" else None
        if now is not None and now != digest:
            out.append(name)
    return out


def _code_parts(fn: Any, module: str | None, seen: set[int]) -> Iterator[str]:
    if isinstance(fn, functools.partial):
        yield f"partial:{_data(fn.args)}:{_data(fn.keywords)}"
        fn = fn.func
    fn = inspect.unwrap(fn)
    if id(fn) in seen:
        return
    seen.add(id(fn))
    if isinstance(fn, types.MethodType):
        yield f"self:{_data(getattr(fn.__self__, '__dict__', None))}"
        fn = fn.__func__
    code = getattr(fn, "__code__", None)
    if code is None:  # a callable object: its class's __call__ and its attributes
        cls = type(fn)
        call = cls.__dict__.get("__call__")
        attrs = _data(getattr(fn, "__dict__", None))
        yield f"object:{cls.__module__}.{cls.__qualname__}:{attrs}"
        if isinstance(call, types.FunctionType):
            yield from _code_parts(call, module, seen)
        return
    yield _source(fn, code)
    yield f"defaults:{_data(fn.__defaults__)}:{_data(fn.__kwdefaults__)}"
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        yield from _named(name, value, module, seen)
    namespace = getattr(fn, "__globals__", {})
    for name in sorted(_names(code)):
        if name in namespace:
            yield from _named(name, namespace[name], module, seen)


def _named(name: str, value: Any, module: str | None, seen: set[int]) -> Iterator[str]:
    if isinstance(value, types.FunctionType):
        if value.__module__ == module:
            yield f"function {name}"
            yield from _code_parts(value, module, seen)
    elif isinstance(value, re.Pattern):
        yield f"{name}=re:{value.pattern!r}:{value.flags}"
    elif not isinstance(value, type | types.ModuleType | types.BuiltinFunctionType):
        data = _data(value)
        if data is not None:
            yield f"{name}={data}"


def _names(code: types.CodeType) -> set[str]:
    """The global names a code object (and the functions nested in it) use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _data(value: Any) -> str | None:
    """A value's canonical JSON, or None when it is not plain data."""
    try:
        return json.dumps(value, sort_keys=True, default=_plain)
    except (TypeError, ValueError):
        return None


def _plain(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError


_SOURCES: dict[int, tuple[types.CodeType, str]] = {}
"""``_source`` by code object (held, so that its id stays its own): a step that makes a
``MockModelAPI`` per call digests the same reply function each time, and reading and
parsing its source took about 1.5 ms of a call."""
_SOURCES_MAX = 4096


def _source(fn: Any, code: types.CodeType) -> str:
    known = _SOURCES.get(id(code))
    if known is not None and known[0] is code:
        return known[1]
    if len(_SOURCES) >= _SOURCES_MAX:
        _SOURCES.clear()
    text = _read_source(fn, code)
    _SOURCES[id(code)] = (code, text)
    return text


def _read_source(fn: Any, code: types.CodeType) -> str:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        top = tree.body[0] if tree.body else None
        if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
            top.name = "_"  # renaming a reply function changes nothing it answers
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
        return ast.dump(tree, include_attributes=False)
    except (OSError, TypeError, SyntaxError, IndexError):
        return _bytecode(code)


def _bytecode(code: types.CodeType) -> str:
    """A code object's instructions, constants and names: the same in every process."""
    consts = [_bytecode(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return f"{code.co_code.hex()}|{consts}|{code.co_names}"


def estimate_tokens(text: str) -> int:
    """About four characters a token, as for English with the common tokenizers."""
    return max(1, (len(text) + 3) // 4)


def request_text(request: ModelRequest) -> str:
    """All the text a request sends."""
    parts: list[str] = []
    for m in request.context:
        if isinstance(m, (SystemMessage, UserMessage, AssistantMessage)):
            parts.extend(b.text for b in m.content)
        elif isinstance(m, ToolMessage):
            parts.extend(r.content for r in m.results)
    return "\n".join(parts)


def _output_of(out: Any) -> tuple[ContentText | ToolCall, ...]:
    """A script's answer as reply blocks: text, a tool call, or a list of both."""
    items = out if isinstance(out, (list, tuple)) else [out]
    return tuple(
        item if isinstance(item, (ContentText, ToolCall)) else ContentText(text=str(item))
        for item in items
    )


def _output_text(output: tuple[ContentText | ToolCall, ...]) -> str:
    """What the reply's output tokens are estimated from (a call as its JSON)."""
    import json

    return "".join(
        b.text if isinstance(b, ContentText) else json.dumps([b.name, b.arguments])
        for b in output
    )


class MockModelAPI:
    """A model that answers from a script, offline, with realistic usage and cost.

    Args:
        model_name: the name calls are recorded under. A name in the price table (say
            ``"gpt-4o-mini"``) is priced like that model, so offline cost reports mean
            something; otherwise ``price_as`` names the model to price it as, or cost is
            ``None``.
        reply: a string; a list of strings used in turn (the last one repeats); or a
            callable of the ``ModelRequest`` returning a string, a ``ToolCall`` (see
            ``fxtr.agents.tool_call``), a list of strings and tool calls (parallel calls),
            a ``ModelResponse`` or a ``ModelCallFailure`` (raised as ``ModelCallError``),
            or raising. Text and tool calls get estimated usage and the model's price.
        delay: seconds each call takes.
        price_as: a priced model name to compute the cost with.
    """

    provider = "mock"

    def __init__(
        self,
        model_name: str,
        reply: Reply,
        *,
        delay: float = 0.0,
        price_as: str | None = None,
    ) -> None:
        self.model_name = model_name
        self.delay = delay
        self.price_as = price_as
        self.requests: list[ModelRequest] = []
        """Every request received, in order (for tests and for inspection)."""
        self.code = reply_digest(reply)
        """The digest of ``reply`` (``reply_digest``): every call records it, and a cached
        result of calls to this model is served only while it is unchanged."""
        _CODE[model_name] = self.code
        if isinstance(reply, str):
            self._next: Callable[[ModelRequest], Any] = lambda request: reply
        elif callable(reply):
            self._next = reply
        else:
            replies = list(reply)
            if not replies:
                msg = "MockModelAPI needs at least one reply."
                raise ValueError(msg)
            counter = itertools.count()
            self._next = lambda request: replies[min(next(counter), len(replies) - 1)]

    def __repr__(self) -> str:
        return f"MockModelAPI({self.model_name!r})"

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Answer from the script.

        Raises:
            ModelCallError: the script returned a ``ModelCallFailure``.
        """
        from fxtr.models._api import call_limiter

        limiter = call_limiter.get()
        async with observe(self.model_name, request, self.provider) as call:
            call.code = self.code
            async with spending(self, request) as spent:
                response = await self._answer(request, call, limiter)
                spent.append(response)
            return response

    async def _answer(self, request: ModelRequest, call: Any, limiter: Any) -> ModelResponse:
        self.requests.append(request)
        if limiter is not None:
            async with limiter(self.provider):
                if self.delay:
                    await asyncio.sleep(self.delay)
                out = self._next(request)
        else:
            if self.delay:
                await asyncio.sleep(self.delay)
            out = self._next(request)
        if isinstance(out, ModelCallFailure):
            raise ModelCallError(out)
        if isinstance(out, ModelResponse):
            call.response = out
            return out
        output = _output_of(out)
        usage = Usage(
            input_tokens=estimate_tokens(request_text(request)),
            output_tokens=estimate_tokens(_output_text(output)),
        )
        priced = self.model_name if has_price(self.model_name) else self.price_as
        calls = any(isinstance(block, ToolCall) for block in output)
        response = ModelResponse(
            output=output,
            usage=usage,
            cost=cost_of(priced, usage) if priced else None,
            stop_reason="tool_calls" if calls else "stop",
            model=self.model_name,
        )
        call.response = response
        return response

    async def aclose(self) -> None:
        """Nothing to close; here so code written for real APIs runs unchanged."""
