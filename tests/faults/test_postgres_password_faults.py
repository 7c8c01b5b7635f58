"""Issue 28 item 2: a PostgreSQL store URL whose server cannot be reached is named in the
error without its password, by the library, the pytest plugin and the ``fxtr`` command."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from fxtr.store import StoreError, open_store
from fxtr.store._factory import url_without_password
from tests.faults.conftest import FXTR, PYTHON, env

pytest.importorskip("psycopg")

PASSWORD = "Pa55-w0rd-never-shown"


def _dead_url(query: str = "") -> str:
    """A URL of a port where nothing listens (bound, never listening)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://fxtr:{PASSWORD}@127.0.0.1:{port}/fxtr{query}"


def test_the_library_names_the_url_without_its_password() -> None:
    url = _dead_url("?password=" + PASSWORD + "2&connect_timeout=5")
    with pytest.raises(StoreError) as caught:
        open_store(url)
    text = str(caught.value)
    assert PASSWORD not in text, text
    assert "postgresql://fxtr:***@127.0.0.1:" in text and "password=***" in text, text
    assert "connect_timeout=5" in text and "Connection refused" in text, text
    assert "check that the server runs" in text, text


def test_url_without_password_forms() -> None:
    assert url_without_password("postgresql://u:p@h:1/d") == "postgresql://u:***@h:1/d"
    assert url_without_password("postgresql://u@h/d") == "postgresql://u@h/d"
    assert url_without_password("postgres://u:p%40x@h/d?sslmode=require") == (
        "postgres://u:***@h/d?sslmode=require"
    )
    assert url_without_password("host=h password='a b' user=u") == "host=h password=*** user=u"


def test_the_plugin_and_the_command_name_the_url_without_its_password(tmp_path: Path) -> None:
    url = _dead_url()
    (tmp_path / "test_e.py").write_text(
        "import pytest\n"
        "from tests.faults.flows import batch\n"
        "@pytest.mark.fxtr(batch, dims={'case': 'keys'}, inputs={'payload': 'ok', 'gate': ''})\n"
        "@pytest.mark.parametrize('keys', ['a'])\n"
        "def test_x(keys, result):\n"
        "    pass\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    runs = {
        "pytest": [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--fxtr-store={url}"],
        "fxtr jobs": [*FXTR, "--store", url, "jobs"],
    }
    for name, args in runs.items():
        proc = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env(),
                              timeout=60)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, (name, out[-2000:])
        assert "postgresql://fxtr:***@127.0.0.1:" in out, (name, out[-2000:])
        assert PASSWORD not in out, (name, out[-2000:])
        assert "Traceback" not in out, (name, out[-2000:])
