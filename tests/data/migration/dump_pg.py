"""Write a PostgreSQL store with fxtr as of 3f6da97 and dump its schema and rows as JSON."""
import json, subprocess, sys
sys.path.insert(0, "/work/wt-cache")
from tests.pgserver import fresh_database, throwaway_postgres
import psycopg

with throwaway_postgres() as admin:
    url = fresh_database(admin, "old")
    subprocess.run([sys.executable, "write_old.py", url], check=True, env={"PYTHONPATH": "/tmp/cache_old/src", "PATH": "/usr/bin:/bin"})
    from fxtr.store import _postgres as old  # the old code: PYTHONPATH puts it first
    assert old.SCHEMA_VERSION == 1, old.__file__
    out = {"schema": old._SCHEMA, "tables": {}}
    with psycopg.connect(url) as conn:
        for table in ("fxtr_schema", "fxtr_entries", "fxtr_history", "fxtr_jobs", "fxtr_invocations", "fxtr_attempts", "fxtr_values"):
            cur = conn.execute(f"SELECT * FROM {table}")
            cols = [d.name for d in cur.description]
            out["tables"][table] = {"columns": cols, "rows": [list(r) for r in cur.fetchall()]}
    json.dump(out, open(sys.argv[1], "w"), indent=1)
