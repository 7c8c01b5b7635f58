"""Regenerate the golden records: `python -m tests.golden.make_golden` from the repo root.

`qa_evaluate.json` is a real record of `tests.examples:evaluate`; the broken copy renames its
second operation, which a replay must catch.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

from fxtr import run
from fxtr.store import open_store
from tests.examples import evaluate, qa_inputs

HERE = Path(__file__).parent


def main() -> None:
    store_dir = tempfile.mkdtemp()
    result = run(evaluate, qa_inputs(), store=store_dir, job_id="golden-qa")
    store = open_store(store_dir)
    job = store.get_job(result.job_id)
    job.update(commit=None, dirty=False, cwd=None)
    invocations = sorted(store.job_invocations(result.job_id).values(), key=lambda r: r["address"])
    for inv in invocations:
        for key in ("started_at", "ended_at"):
            inv.pop(key, None)
    entities = {}
    for key in store.cache.iterkeys():
        if key.startswith("n|"):
            entities[key[2:]] = store.cache.get(key)
    data = {
        "job": job,
        "ops": store.get_ops(result.job_id, 1),
        "invocations": invocations,
        "entities": entities,
    }
    (HERE / "qa_evaluate.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    broken = copy.deepcopy(data)
    broken["ops"]["qa.evaluate"][1]["name"] = "scores"
    (HERE / "qa_evaluate_broken.json").write_text(
        json.dumps(broken, indent=1, sort_keys=True) + "\n"
    )


if __name__ == "__main__":
    main()
