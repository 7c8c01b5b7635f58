"""The public names are exactly those the design contract gives (DESIGN, the layout tables)."""

import fxtr
import fxtr.experiment.arrays
import fxtr.experiment.entities
import fxtr.experiment.errors
import fxtr.experiment.handles
import fxtr.experiment.jobs
import fxtr.experiment.steps
import fxtr.experiment.workflows


def test_public_modules_export_the_contract_names():
    """Each public module exports the names of the contract."""
    assert {"workflow", "WorkflowContext"} <= set(fxtr.experiment.workflows.__all__)
    assert {"step", "StepContext"} <= set(fxtr.experiment.steps.__all__)
    assert {"ArrayHandle", "ScalarHandle"} <= set(fxtr.experiment.handles.__all__)
    assert fxtr.experiment.arrays.__all__ == ["Array"]
    assert set(fxtr.experiment.entities.__all__) == {"Entity", "BoundID"}
    assert set(fxtr.experiment.errors.__all__) == {
        "FxtrError",
        "DeterminismError",
        "SignatureError",
        "CacheConflictError",
        "UpstreamFailedError",
    }
    assert {"launch", "resume", "run", "JobResult"} <= set(fxtr.experiment.jobs.__all__)


def test_top_level_reexports_everything_and_only_what_exists():
    """`fxtr` re-exports every public name, and each resolves."""
    for module in (
        fxtr.experiment.workflows,
        fxtr.experiment.steps,
        fxtr.experiment.handles,
        fxtr.experiment.arrays,
        fxtr.experiment.entities,
        fxtr.experiment.errors,
    ):
        for name in module.__all__:
            if name in ("StepDefinition", "WorkflowDefinition", "FieldQuery"):
                continue
            assert getattr(fxtr, name) is getattr(module, name)
    for name in fxtr.__all__:
        assert hasattr(fxtr, name)


def test_error_hierarchy():
    """SignatureError is a TypeError and every error hangs under FxtrError."""
    from fxtr import FxtrError, SignatureError
    from fxtr.experiment import errors

    assert issubclass(SignatureError, TypeError)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), FxtrError)
