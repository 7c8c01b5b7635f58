"""Run one fault job in its own process: ``python -m tests.faults.driver SPEC_JSON``.

SPEC: ``store``, ``keys`` (list), ``payload``, ``gate``, and optional ``conflict``,
``job_id``, ``concurrency``, ``resume`` (a job id to resume instead), ``out`` (a file for the result JSON,
written last). The result: status, job_id, attempt, output, invocations.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import fxtr
from fxtr.experiment.arrays import Array
from tests.faults.flows import batch


def result_json(result: Any) -> dict[str, Any]:
    """What the tests look at in a ``JobResult``."""
    return {
        "status": result.status,
        "job_id": result.job_id,
        "attempt": result.attempt,
        "output": None if result.output is None else result.output.to_dict(),
        "invocations": [
            {
                "address": inv.address,
                "status": inv.status,
                "from_cache": inv.from_cache,
                "reason": inv.reason,
                "error": None if inv.error is None else str(inv.error),
            }
            for inv in result.invocations
        ],
    }


def main(spec: dict[str, Any]) -> None:
    options: dict[str, Any] = {"store": spec["store"], "conflict": spec.get("conflict", "review")}
    if spec.get("concurrency"):
        options["concurrency"] = spec["concurrency"]
    if spec.get("resume"):
        result = asyncio.run(fxtr.resume(spec["resume"], **options))
    else:
        keys = {k: k for k in spec["keys"]}
        inputs = {
            "keys": Array.from_mapping(keys, dims=["case"], value_type=str),
            "payload": spec.get("payload", "ok"),
            "gate": spec.get("gate", ""),
        }
        if spec.get("job_id"):
            options["job_id"] = spec["job_id"]
        result = fxtr.run(batch, inputs, **options)
    text = json.dumps(result_json(result), ensure_ascii=True)
    if spec.get("out"):
        with open(spec["out"], "w") as handle:
            handle.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
