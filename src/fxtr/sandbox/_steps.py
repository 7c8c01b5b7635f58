"""The sandbox's steps: building the starting tree, a tool call, and a check of a tree.

A step takes trees by digest. It runs on an idle workspace that holds its tree (the one the
previous call left) or materializes the tree from the store's parts; after it, the new files'
bytes and the new manifest are queued as parts of the step's result (written with it, so a
cached result never names a part the store lacks).
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Iterable, Mapping

from fxtr.agents import Tool, ToolCall, ToolResult
from fxtr.experiment.steps import StepContext, step
from fxtr.sandbox._backend import SandboxError, run
from fxtr.sandbox._files import PARTS, Files, Manifest, parse
from fxtr.sandbox._session import SandboxSession
from fxtr.sandbox._tools import CommandFailedError
from fxtr.sandbox._types import Built, CallOutcome, Layer, Sandbox
from fxtr.sandbox._workspace import POOL, Workspace, manifest_part

SETUP_TIMEOUT = 1800.0
"""Seconds a setup command may run (it installs things, with the network)."""


class MissingPartsError(SandboxError):
    """A tree's parts are in neither this process nor the store."""


async def parts_of(context: StepContext | None, digests: Iterable[str]) -> dict[str, bytes]:
    """The bytes of ``digests``: this process's, else the store's (read once, together).

    Raises:
        MissingPartsError: some are nowhere (a store that lost them: run the trajectory again
            with --fxtr-overwrite).
    """
    wanted = [d for d in dict.fromkeys(digests) if d]
    missing = PARTS.missing(wanted)
    if missing and context is not None:
        found = await context.get_blobs(missing)
        for digest, data in found.items():
            PARTS.add(digest, data)
    found_all = {d: PARTS.get(d) for d in wanted}
    lost = [d for d, data in found_all.items() if data is None]
    if lost:
        msg = (
            f"{len(lost)} part(s) of a sandbox tree are missing from the store (first: "
            f"{lost[0][:12]}): the store lost them. Run the eval again with --fxtr-overwrite."
        )
        raise MissingPartsError(msg)
    return {d: data for d, data in found_all.items() if data is not None}


async def manifest_of(context: StepContext | None, tree: str) -> Manifest:
    """The manifest of the tree ``tree``."""
    data = (await parts_of(context, [tree]))[tree]
    manifest: Manifest = json.loads(data)
    return manifest


def _file_digests(manifest: Mapping[str, str]) -> list[str]:
    return [d for _, d in (parse(v) for v in manifest.values()) if d]


async def acquire(context: StepContext | None, tree: str) -> Workspace:
    """A workspace holding ``tree``: an idle one, else a new one it is written to."""
    ws = POOL.take(tree)
    if ws is not None:
        return ws
    manifest = await manifest_of(context, tree)
    parts = await parts_of(context, _file_digests(manifest))
    ws = POOL.new()
    try:
        ws.apply(manifest, parts)
    except BaseException:
        POOL.discard(ws)
        raise
    POOL.materialized += 1
    return ws


def diff(before: Mapping[str, str], after: Mapping[str, str], b: str, a: str) -> Layer:
    """The layer that turns ``before`` into ``after``."""
    return Layer(
        before=b,
        after=a,
        added={p: v for p, v in after.items() if p not in before},
        changed={p: v for p, v in after.items() if p in before and before[p] != v},
        deleted=tuple(sorted(p for p in before if p not in after)),
    )


def record(
    context: StepContext | None, ws: Workspace, read: Mapping[str, bytes], layer: Layer
) -> None:
    """Queue the new files' bytes and the new manifest as parts of the step's result."""
    new = {parse(v)[1] for v in (*layer.added.values(), *layer.changed.values())}
    parts = {d: data for d, data in read.items() if d in new}
    digest, data = manifest_part(ws.manifest)
    parts[digest] = data
    for d, b in parts.items():
        PARTS.add(d, b)
    if context is not None:
        context.put_blobs(parts)


async def build(context: StepContext | None, files: Files, box: Sandbox) -> Built:
    """The starting tree: ``files``, then ``setup`` run over them (with the network).

    Raises:
        SandboxError: the sandbox cannot start, or a setup command fails (its output says why).
    """
    parts = await parts_of(context, _file_digests(files.manifest))
    digest, data = manifest_part(files.manifest)
    PARTS.add(digest, data)
    queued = {**parts, digest: data}
    output = []
    if not box.setup:
        if context is not None:
            context.put_blobs(queued)
        size = sum(len(parts[d]) for d in _file_digests(files.manifest))
        return Built(tree=digest, files=len(files.manifest), bytes=size)
    ws = POOL.new()
    try:
        ws.apply(files.manifest, parts)
        session = SandboxSession(box, ws)
        limits = box.limits(network=True, timeout=max(box.timeout, SETUP_TIMEOUT))
        for command in box.setup:
            out = await run(ws.path, limits, ["bash", "-c", command], uid=ws.uid)
            text = session.text(out)
            output.append(f"$ {command}\n{text}")
            if out.exit_code != 0:
                msg = (
                    f"Sandbox setup command {command!r} failed:\n{text[-2000:]}\nFix the "
                    "command (it runs in the sandbox over the files, with the network)."
                )
                raise SandboxError(msg)
        manifest, read = ws.capture()
    except BaseException:
        POOL.discard(ws)
        raise
    layer = diff(files.manifest, manifest, digest, ws.digest)
    record(context, ws, read, layer)
    if context is not None:
        context.put_blobs(queued)
    POOL.give_back(ws)
    return Built(tree=ws.digest, files=len(manifest), bytes=ws.size, output="\n".join(output))


@step(name="fxtr.sandbox.setup")
async def setup_tree(
    context: StepContext, files: Files, setup: tuple[str, ...], backend: str, image: str | None
) -> Built:
    """Build a sandbox's starting tree: keyed by the files' digest, the commands, the backend."""
    box = Sandbox(files=Files(manifest={}), setup=setup, backend=backend, image=image)
    return await build(context, files, box)


async def run_call(
    context: StepContext | None, tool: Tool, call: ToolCall, box: Sandbox, tree: str
) -> CallOutcome:
    """Run one sandbox tool call on ``tree``; record the layer it made.

    Raises:
        SandboxError: the sandbox could not start (a failure of the machine, never cached).
    """
    ws = await acquire(context, tree)
    before = ws.manifest
    session = SandboxSession(box, ws)
    arguments = {k: v for k, v in call.arguments.items() if k != "sandbox"}
    started = time.perf_counter()
    try:
        value = tool.fn(**arguments, sandbox=session)
        if inspect.isawaitable(value):
            value = await value
        result = ToolResult(tool_call_id=call.id, content=str(value))
    except SandboxError:
        POOL.discard(ws)
        raise
    except CommandFailedError as exc:
        result = ToolResult(tool_call_id=call.id, content=str(exc), is_error=True)
    except Exception as exc:  # the model sees the error and may try again
        result = ToolResult(
            tool_call_id=call.id, content=f"{type(exc).__name__}: {exc}", is_error=True
        )
    seconds = time.perf_counter() - started
    try:
        manifest, read = ws.capture()
        if ws.size > box.tree_mb * 1024 * 1024:
            result = _undo(result, box, ws.size)
            ws.apply(before, await parts_of(context, _changed_back(before, manifest)))
            manifest, read = ws.capture()
    except BaseException:
        POOL.discard(ws)
        raise
    layer = diff(before, manifest, tree, ws.digest)
    record(context, ws, read, layer)
    POOL.give_back(ws)
    return CallOutcome(
        result=result,
        tree=ws.digest,
        layer=layer,
        commands=tuple(session.commands),
        seconds=seconds,
    )


def _changed_back(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return [parse(v)[1] for p, v in before.items() if after.get(p) != v and parse(v)[1]]


def _undo(result: ToolResult, box: Sandbox, size: int) -> ToolResult:
    note = (
        f"[the tree holds {size / 1048576:.1f} MiB, past its limit of {box.tree_mb} MiB: this "
        "call's changes were undone]"
    )
    return ToolResult(
        tool_call_id=result.tool_call_id, content=f"{result.content}\n{note}", is_error=True
    )


@step(name="fxtr.sandbox.call")
async def sandbox_call(
    context: StepContext, tool: Tool, call: ToolCall, sandbox: Sandbox, tree: str
) -> CallOutcome:
    """A sandbox tool call on the tree ``tree`` (its digest is part of the fingerprint)."""
    return await run_call(context, tool, call, sandbox, tree)
