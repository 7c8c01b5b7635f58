"""Issue 15 item 9, output side: a key held in the store reaches nothing the CLI or viewer writes.

A job is written by a process that does not know the key (so nothing redacts it on the way
in: the store holds it raw, without its prefix and in base64, in the step's result, logs,
error and inputs, as a careless provider echo leaves it). Then a process that knows the key
(``GOOGLE_API_KEY`` in its environment, as a user's shell has it) runs every output path:
``fxtr export`` (file and stdout), ``fxtr view --export``, ``fxtr show`` (plain and ``-v``),
``fxtr jobs`` (table and ``--json``), ``fxtr cache history`` and every viewer route a job's
page calls, including an error response. None may hold the key in any form.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from pathlib import Path
from typing import Annotated

from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow
from tests.faults.conftest import PYTHON, ROOT, all_bytes, env


def forms(key: str) -> dict[str, str]:
    """The forms a key travels in (what ``fxtr.secrets`` promises to redact)."""
    bare = key.removeprefix("AIza")
    return {
        "raw": key,
        "bare": bare,
        "b64": base64.b64encode(key.encode()).decode().rstrip("="),
        "b64url": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "basic": base64.b64encode(f":{key}".encode()).decode().rstrip("="),
        # issue 28 item 7: base64 at other alignments (a user name, a scheme before the key)
        "basic-user": base64.b64encode(f"user:{key}".encode()).decode().rstrip("="),
        "bearer-b64": base64.urlsafe_b64encode(f"Bearer {key}".encode()).decode().rstrip("="),
    }


UNKNOWN_REDACTED = {"bearer-b64"}
"""Forms redacted even by a process that does not know the key (``Bearer ...`` is key-shaped)."""


def echo(key: str) -> str:
    f = forms(key)
    return (
        f"Incorrect API key provided: {f['raw']} (bare {f['bare']}, b64 {f['b64']}, basic "
        f"{f['basic']}, Basic {f['basic-user']}, token {f['bearer-b64']})"
    )


@step(name="faults.leaky")
async def leaky(context: StepContext, case: str, key: str) -> str:
    """What a step around a careless provider does: log, return or raise the echo."""
    context.log(f"provider said: {echo(key)}")
    if case == "boom":
        raise RuntimeError(f"401 from provider: {echo(key)}")
    return f"reply: {echo(key)}"


@workflow(name="faults.leaky_flow")
async def leaky_flow(
    context: WorkflowContext,
    cases: Annotated[ArrayHandle[str], "[case: str]"],
    key: ScalarHandle[str],
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("call", leaky, {"case": cases, "key": key}, map_over=["case"])


WRITE = """
import sys, fxtr
from fxtr.experiment.arrays import Array
from tests.faults.test_secrets_outputs_faults import leaky_flow
cases = Array.from_mapping({"ok": "ok", "boom": "boom"}, dims=["case"], value_type=str)
result = fxtr.run(leaky_flow, {"cases": cases, "key": sys.argv[2]}, store=sys.argv[1])
print(result.job_id, result.status)
"""

READ = """
import contextlib, io, json, sys
import httpx
from fxtr.cli import main
from fxtr.cli._server import serve
from fxtr.store import open_store

store, job, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
outputs = {}
commands = {
    "export -o": ["export", job, "-o", out_dir + "/e.json"],
    "export": ["export", job],
    "view --export": ["view", "--export", job, "-o", out_dir + "/e.html"],
    "show": ["show", job],
    "show -v": ["show", job, "-v"],
    "jobs": ["jobs"],
    "jobs --json": ["jobs", "--json"],
    "cache history": ["cache", "history", "faults.leaky_flow/call[case=ok]"],
}
for name, args in commands.items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--store", store, *args])
    outputs[name] = {"code": code, "text": out.getvalue() + err.getvalue()}
server, _ = serve(open_store(store), "127.0.0.1", 0)
base = f"http://127.0.0.1:{server.server_address[1]}"
with httpx.Client(base_url=base, timeout=30) as client:
    routes = ["/api/jobs", f"/api/jobs/{job}", f"/api/jobs/{job}/graph",
              f"/api/jobs/{job}/invocations"]
    routes += [f"/api/jobs/{job}/invocation?address=faults.leaky_flow/call%5Bcase={case}%5D"
               for case in ("ok", "boom")]
    for route in routes:
        reply = client.get(route)
        outputs["GET " + route] = {"code": reply.status_code, "text": reply.text}
    # an error response that echoes what it was asked for
    reply = client.get(f"/api/jobs/{job}/invocation", params={"address": sys.argv[4]})
    outputs["GET missing address"] = {"code": reply.status_code, "text": reply.text}
server.shutdown()
print(json.dumps(outputs))
"""


def test_a_key_in_the_store_reaches_no_output_of_the_cli_or_viewer(tmp_path: Path) -> None:
    key = "AIza" + secrets.token_hex(18)
    store = tmp_path / "store"
    write = subprocess.run([PYTHON, "-c", WRITE, str(store), key], capture_output=True,
                           text=True, cwd=ROOT, env=env(), timeout=60)
    assert write.returncode == 0, write.stderr[-3000:]
    job_id, status = write.stdout.split()
    assert status == "failed"
    held = all_bytes(store)
    assert all(text.encode() in held for name, text in forms(key).items()
               if name not in UNKNOWN_REDACTED), (
        "precondition: the writer did not know the key, so the store should hold it in every form"
    )
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    missing = f"faults.leaky_flow/call[case={key}]"
    read = subprocess.run([PYTHON, "-c", READ, str(store), job_id, str(out_dir), missing],
                          capture_output=True, text=True, cwd=ROOT,
                          env=env(GOOGLE_API_KEY=key), timeout=120)
    assert read.returncode == 0, read.stderr[-3000:]
    outputs = json.loads(read.stdout.strip().splitlines()[-1])
    for name, got in outputs.items():
        expected = (404 if "missing" in name else 200) if name.startswith("GET ") else 0
        assert got["code"] == expected, (name, got["text"][-2000:])
    files = {p.name: p.read_text(encoding="utf-8") for p in out_dir.iterdir()}
    assert set(files) == {"e.json", "e.html"}
    export = json.loads(files["e.json"])
    assert "Incorrect API key provided" in json.dumps(export), "the echo did not reach the export"
    assert json.loads(outputs["export"]["text"]) == export
    texts = {name: got["text"] for name, got in outputs.items()} | files
    leaks = [f"{form} in {name}" for form, text in forms(key).items()
             for name, out in texts.items() if text in out]
    assert not leaks, leaks
    assert "[redacted]" in files["e.html"] and "[redacted]" in outputs["show -v"]["text"]
