"""Jobs: launch a root workflow, resume it, and read what it did."""

from fxtr.experiment._jobs import JobResult, launch, resume, run, verify
from fxtr.experiment._records import Invocation, WorkflowRun

__all__ = ["Invocation", "JobResult", "WorkflowRun", "launch", "resume", "run", "verify"]
