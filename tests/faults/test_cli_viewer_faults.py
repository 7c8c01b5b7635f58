"""Issue 15, CLI and viewer: bad option values, bad query parameters, headers, Host."""

from __future__ import annotations

import http.client
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import FXTR, ROOT, env, fxtr_cli, job


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("viewer") / "store"
    result = job({"store": str(store), "keys": ["k1", "k2"], "payload": "ok"})
    return store, result["job_id"]


@pytest.fixture(scope="module")
def viewer(populated: tuple[Path, str]) -> Iterator[int]:
    store, _ = populated
    proc = subprocess.Popen([*FXTR, "--store", str(store), "view", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=ROOT, env=env())
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://[^:/]+:(\d+)/", line)
    assert match, line
    yield int(match.group(1))
    proc.terminate()
    proc.wait(10)
    proc.stdout.close()


def _get(port: int, path: str, host: str | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {} if host is None else {"Host": host}
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read().decode(errors="replace")
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


@pytest.mark.parametrize("args,valid", [(["view", "--port", "99999"], "65535"),
                                        (["jobs", "--status", "bogus"], "succeeded")])
def test_bad_cli_values_are_one_line_naming_valid_values(populated: tuple[Path, str],
                                                        args: list[str], valid: str) -> None:
    store, _ = populated
    proc = fxtr_cli("--store", str(store), *args, timeout=20)
    assert proc.returncode in (1, 2), (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip() and "usage:" not in line]
    assert len(errors) == 1, proc.stderr
    assert valid in errors[0], errors[0]


@pytest.mark.parametrize("query", ["offset=abc", "offset=-1", "limit=abc", "limit=-5", "limit=1e3"])
def test_bad_offset_or_limit_is_a_400_with_a_message(viewer: int, populated: tuple[Path, str],
                                                     query: str) -> None:
    _, job_id = populated
    status, _, body = _get(viewer, f"/api/jobs/{job_id}/invocations?{query}")
    assert status == 400, (status, body[:300])
    name = query.split("=")[0]
    assert name in body, body[:300]


@pytest.mark.parametrize("path", ["/api/jobs/nosuchjob", "/nope", "/api/jobs/x/invocations?offset=x"])
def test_error_pages_carry_the_security_headers(viewer: int, path: str) -> None:
    status, headers, _ = _get(viewer, path)
    assert status >= 400
    assert "content-security-policy" in headers, headers
    assert headers.get("x-content-type-options") == "nosniff", headers
    assert "access-control-allow-origin" not in headers


@pytest.mark.parametrize("host", ["user@127.0.0.1", "evil.com@127.0.0.1", "user:pw@localhost"])
def test_a_host_with_userinfo_is_refused(viewer: int, host: str) -> None:
    status, headers, _ = _get(viewer, "/api/jobs", host=f"{host}:{viewer}")
    assert status in (400, 403, 421), status
    assert "content-security-policy" in headers


def test_a_loopback_host_is_served(viewer: int) -> None:
    status, _, body = _get(viewer, "/api/jobs", host=f"127.0.0.1:{viewer}")
    assert status == 200, body[:300]


def test_damaged_job_record_leaves_the_viewer_listing_the_others(tmp_path: Path) -> None:
    """Item 4 in the viewer: /api/jobs lists the healthy job."""
    import sqlite3

    store = tmp_path / "store"
    one = job({"store": str(store), "keys": ["k1"], "payload": "ok"})
    two = job({"store": str(store), "keys": ["k1"], "payload": "ok"})
    with sqlite3.connect(store / "cache" / "cache.db") as con:
        con.execute("UPDATE FxtrJobs SET record = ? WHERE job_id = ?", ("{broken", one["job_id"]))
    proc = subprocess.Popen([*FXTR, "--store", str(store), "view", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=ROOT, env=env())
    try:
        assert proc.stdout is not None
        match = re.search(r":(\d+)/", proc.stdout.readline())
        assert match
        status, _, body = _get(int(match.group(1)), "/api/jobs")
        assert status == 200, body[:500]
        assert two["job_id"] in body
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
