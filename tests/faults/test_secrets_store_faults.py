"""Issue 15, item 9, store side: a provider key never reaches the store, in any form.

(The output side, export/HTML/show/viewer, is tests/faults/test_secrets_outputs_faults.py.)
ENGINE's: records, results, errors and logs are redacted before ``store.write``.
"""

from __future__ import annotations

import base64
import secrets
import subprocess
from pathlib import Path

from tests.faults.conftest import PYTHON, ROOT, env

SCRIPT = """
import sys, fxtr
from fxtr.experiment.arrays import Array
from tests.faults.secret_flow import secrets_flow
cases = Array.from_mapping({"ok": "ok", "boom": "boom"}, dims=["case"], value_type=str)
result = fxtr.run(secrets_flow, {"cases": cases, "url": sys.argv[2]}, store=sys.argv[1])
print(result.job_id, result.status)
"""


def _forms(key: str) -> dict[str, str]:
    bare = key.removeprefix("sk-proj-")
    return {
        "raw": key,
        "bare": bare,
        "b64": base64.b64encode(key.encode()).decode().rstrip("="),
        "b64url": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "basic": base64.b64encode(f":{key}".encode()).decode().rstrip("="),
        "bare-b64": base64.b64encode(bare.encode()).decode().rstrip("="),
        # issue 28 item 7: base64 at other alignments (a user name, a scheme before the key)
        "basic-user": base64.b64encode(f"user:{key}".encode()).decode().rstrip("="),
        "bearer-b64": base64.urlsafe_b64encode(f"Bearer {key}".encode()).decode().rstrip("="),
    }


def test_the_key_is_in_no_file_of_the_store(tmp_path: Path) -> None:
    key = "sk-proj-" + secrets.token_hex(20)
    server = subprocess.Popen([PYTHON, "-m", "tests.faults.echo_server"], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT, env=env())
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        store = tmp_path / "store"
        child_env = env(OPENAI_API_KEY=key)
        run = subprocess.run([PYTHON, "-c", SCRIPT, str(store), f"http://127.0.0.1:{port}/v1/chat"],
                             capture_output=True, text=True, cwd=ROOT, env=child_env, timeout=60)
        assert run.returncode == 0, run.stderr[-3000:]
        _job_id, status = run.stdout.split()
        assert status == "failed"
        outputs = {"run.stderr": run.stderr}
    finally:
        server.kill()
        server.wait(10)
        if server.stdout:
            server.stdout.close()
    files = {p.relative_to(tmp_path): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert any(b"Incorrect API key" in data for data in files.values()), "the echo was not stored"
    leaks = []
    for form, text in _forms(key).items():
        leaks += [f"{form} in {name}" for name, data in files.items() if text.encode() in data]
        leaks += [f"{form} in {name}" for name, out in outputs.items() if text in out]
    assert not leaks, leaks
