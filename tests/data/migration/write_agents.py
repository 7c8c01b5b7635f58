"""Write a store of two agent evals with fxtr as of 8b4fef9 (environments stored whole).

Run from the repository's root with that commit's ``src`` first on ``PYTHONPATH``:
``PYTHONPATH=OLD/src:. python tests/data/migration/write_agents.py STORE``.
"""

import sys

import fxtr
from fxtr.evals import evaluate
from fxtr.experiment import run
from tests import migration_agents as m

print(fxtr.__file__, file=sys.stderr)
store = sys.argv[1]
for inputs in (m.env_inputs(), m.plain_inputs()):
    result = run(evaluate, inputs, store=store)
    assert result.status == "succeeded", result.status
    print(result.output.to_dict(), file=sys.stderr)
