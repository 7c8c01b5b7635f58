"""The kit's steps keep the code hashes of the last release, so an upgrade serves their cache.

A kit eval's cached answers and grades are keyed by the ``fxtr.generate`` and ``fxtr.score``
steps' normalized source. Changing either body sends every cached invocation of every kit
eval to review after an upgrade (``code of fxtr.generate``). The hashes below are what the
release before this one (commit 3f6da97) computed for the same steps; new behaviour goes into
the helpers the steps call (``fxtr.evals._calls``), never into the step bodies.
"""

from fxtr.evals._evaluate import generate, score

RELEASED = {"fxtr.generate": "6113a97d6e109c99", "fxtr.score": "6225ec7b5de6ba7c"}


def test_the_kit_steps_keep_the_released_code_hashes():
    assert {generate.name: generate.source_hash, score.name: score.source_hash} == RELEASED
