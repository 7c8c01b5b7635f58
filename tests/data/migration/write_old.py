"""Write a store with fxtr as of 3f6da97 (one entry per address, h| histories)."""
import sys
from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, run, step, workflow
from typing import Annotated
import fxtr

print(fxtr.__file__, file=sys.stderr)


@step(name="old.shout")
async def shout(context: StepContext, word: str) -> str:
    return word.upper()


@workflow(name="old.wf")
async def wf(
    context: WorkflowContext, words: Annotated[ArrayHandle[str], "[w: str]"]
) -> Annotated[ArrayHandle[str], "[w: str]"]:
    return context.run_step("shout", shout, {"word": words}, map_over=["w"])


store = sys.argv[1]
words = Array.from_mapping({"a": "alpha", "b": "beta"}, dims=["w"], value_type=str)
assert run(wf, {"words": words}, store=store).status == "succeeded"
changed = Array.from_mapping({"a": "ALEPH", "b": "beta"}, dims=["w"], value_type=str)
assert run(wf, {"words": changed}, store=store, conflict="overwrite").status == "succeeded"
