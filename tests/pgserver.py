"""A throwaway PostgreSQL cluster on a loopback port, for the tests and the benchmarks.

initdb in a temporary folder, `pg_ctl start` on 127.0.0.1 with a free port, trust auth for a
role named fxtr; stopped and removed afterwards. As root, the server runs as the `postgres`
user (initdb refuses root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator


def server_bin() -> str | None:
    """The folder with initdb and pg_ctl, if PostgreSQL's server is installed."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return os.path.dirname(os.path.realpath(found))
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(folder, "pg_ctl")):
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Start a cluster; yield the URL of its `postgres` database as role `fxtr`."""
    folder = server_bin()
    if folder is None:
        msg = "PostgreSQL's server binaries (initdb, pg_ctl) are not installed"
        raise RuntimeError(msg)
    tmp = tempfile.mkdtemp(prefix="fxtr-pg-")
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(tmp, "data")
    port = _free_port()
    run = {"check": True, "capture_output": True, "text": True}
    subprocess.run([*prefix, f"{folder}/initdb", "-D", data, "-A", "trust", "-U", "fxtr"], **run)
    subprocess.run(
        [
            *prefix,
            f"{folder}/pg_ctl",
            "-D",
            data,
            "-l",
            os.path.join(tmp, "log"),
            "-w",
            "-o",
            f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        ],
        **run,
    )
    try:
        yield f"postgresql://fxtr@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, f"{folder}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(tmp, ignore_errors=True)


def fresh_database(admin_url: str, name: str) -> str:
    """Create an empty database; its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + "/" + name
