"""A store written before entries were kept per fingerprint opens and serves (issue 24, item 4).

The stores in ``tests/data/migration`` were written by fxtr at commit 3f6da97 (see its
README): one entry per address, and the entry an overwrite replaced in a history.
"""

from __future__ import annotations

import json
import sqlite3
import tarfile
from pathlib import Path
from typing import Annotated

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, run, step, workflow
from fxtr.cli import main
from fxtr.store import open_store

DATA = Path(__file__).resolve().parent / "data" / "migration"


@step(name="old.shout")
async def shout(context: StepContext, word: str) -> str:
    return word.upper()  # the code of write_old.py's step, so its entries are this step's


@workflow(name="old.wf")
async def wf(
    context: WorkflowContext, words: Annotated[ArrayHandle[str], "[w: str]"]
) -> Annotated[ArrayHandle[str], "[w: str]"]:
    return context.run_step("shout", shout, {"word": words}, map_over=["w"])


def _words(a: str) -> dict[str, Array[str]]:
    return {"words": Array.from_mapping({"a": a, "b": "beta"}, dims=["w"], value_type=str)}


def _serves_what_the_old_fxtr_wrote(location: str) -> None:
    store = open_store(location)
    # the current entries are served as they were
    result = run(wf, _words("ALEPH"), store=location)
    assert result.status == "succeeded" and all(i.from_cache for i in result.invocations)
    assert result.output.to_dict() == {"a": "ALEPH", "b": "BETA"}
    # the entry the old overwrite replaced is a kept entry: going back is a hit, not a review
    (kept,) = store.history("old.wf/shout[w=a]")
    assert json.loads(kept["result"]) == "ALPHA"
    back = run(wf, _words("alpha"), store=location)
    assert back.status == "succeeded" and all(i.from_cache for i in back.invocations)
    assert back.output.to_dict()["a"] == "ALPHA"
    assert [h["result"] for h in store.history("old.wf/shout[w=a]")] == ['"ALEPH"']
    # a fingerprint never held is still reviewed; the old jobs are still listed
    assert run(wf, _words("aleph?"), store=location).status == "needs_review"
    assert main(["--store", location, "jobs", "--json"]) == 0


def test_a_diskcache_store_written_before_keep_opens_and_serves(tmp_path, capsys):
    with tarfile.open(DATA / "diskcache_store.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    location = str(tmp_path / "store")
    db = sqlite3.connect(tmp_path / "store" / "cache" / "cache.db")
    assert db.execute("SELECT count(*) FROM Cache WHERE key LIKE 'h|%'").fetchone() == (1,)
    old_values = dict(db.execute("SELECT key, value FROM Cache WHERE key LIKE 'v|%'").fetchall())
    db.close()
    assert old_values
    # the input values the old fxtr kept as cache keys are read (new ones go to FxtrValues)
    store = open_store(location)
    assert {k: store.get_value(k[2:]) for k in old_values} == old_values
    assert store.volume()["input values"] == len(old_values)
    _serves_what_the_old_fxtr_wrote(location)
    jobs = json.loads(capsys.readouterr().out)
    assert len(jobs) >= 2
    db = sqlite3.connect(tmp_path / "store" / "cache" / "cache.db")
    assert db.execute("SELECT count(*) FROM Cache WHERE key LIKE 'h|%'").fetchone() == (0,)
    db.close()


def test_a_postgres_store_written_before_keep_migrates_to_schema_2(postgres_server):
    import psycopg

    from tests.pgserver import fresh_database

    dump = json.loads((DATA / "postgres_store.json").read_text())
    location = fresh_database(postgres_server, "t_migration_schema_1")
    with psycopg.connect(location, autocommit=True) as conn:
        for statement in dump["schema"]:
            conn.execute(statement)
        for table, content in dump["tables"].items():
            columns = ", ".join(content["columns"])
            marks = ", ".join(["%s"] * len(content["columns"]))
            for row in content["rows"]:
                conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", row)
        assert conn.execute("SELECT version FROM fxtr_schema").fetchone() == (1,)
    _serves_what_the_old_fxtr_wrote(location)
    with psycopg.connect(location) as conn:
        assert conn.execute("SELECT max(version) FROM fxtr_schema").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM fxtr_history").fetchone() == (0,)
