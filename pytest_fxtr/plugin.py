"""The fxtr pytest plugin: evals as parametrized tests, one job per eval per run.

Loading it stays cheap: fxtr itself is imported only when an eval is collected.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Any

import pytest

from pytest_fxtr._settings import Settings, add_options, resolve
from pytest_fxtr._values import unencodable_cases, warn_non_finite

STATE = pytest.StashKey["State"]()
_FAILURE = pytest.StashKey[str]()
_RESULT = pytest.StashKey[Any]()


@dataclasses.dataclass
class State:
    """What the plugin keeps for one pytest run (on every process)."""

    settings: Settings
    run_id: str
    worker: bool
    evals: dict[str, Any] = dataclasses.field(default_factory=dict)
    payloads: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    header_done: bool = False
    jobs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    baselines: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Per eval, its ``Baseline`` (or why there is none), found before the jobs run."""
    evaluations: list[Any] = dataclasses.field(default_factory=list)
    """The gated evaluations, one per eval (built at the end, on the controller)."""
    outcomes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Each eval item's pytest outcome with its keys (the viewer shows it on an unscored cell)."""
    loop: Any = None
    """The event loop the run's jobs share (started with the first eval)."""
    otel_warning: str | None = None
    """Why the OpenTelemetry export (``--fxtr-otel``) stopped, shown once in the summary."""
    dry_plans: list[Any] = dataclasses.field(default_factory=list)
    """``--fxtr-dry-run``: each eval's plan and forecast."""
    budget: Any = None
    """``--fxtr-max-cost``: the run's ``Budget`` (spent, refused), shared by its jobs."""


def _loop(state: State) -> Any:
    if state.loop is None:
        from pytest_fxtr._evals import SessionLoop

        state.loop = SessionLoop()
    return state.loop


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--fxtr-*`` options and their ``fxtr_*`` ini twins."""
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A dry run plans in this process: pytest-xdist's workers are not started for it."""
    dry = config.getoption("--fxtr-dry-run", None) or config.getini("fxtr_dry_run")
    if dry and getattr(config.option, "numprocesses", None):
        config.option.numprocesses = 0
        config.option.dist = "no"


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the settings once and register the marker."""
    config.addinivalue_line(
        "markers",
        "fxtr(workflow, dims=None, inputs=None, threshold=None, cluster=None): run the test's "
        "parametrized cases as one fxtr job of `workflow`; each item gets its slice as the "
        "`result` fixture.",
    )
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput.get("fxtr_run_id") if workerinput else None
    config.stash[STATE] = State(
        settings=resolve(config),
        run_id=run_id or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6],
        worker=workerinput is not None,
    )
    config.pluginmanager.register(_Reports(config), "fxtr-reports")
    from fxtr.arrays import use_store  # load_cases("array:qa@3") reads the run's store

    use_store(config.stash[STATE].settings.store)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: workers share the controller's run id, so they join one job per eval."""
    node.workerinput["fxtr_run_id"] = node.config.stash[STATE].run_id


def _header(config: pytest.Config, state: State) -> None:
    if state.header_done:
        return
    state.header_done = True
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(state.settings.header())


def pytest_collection_finish(session: pytest.Session) -> None:
    """Group the selected items (after -k, -m, --lf) by eval; validate the markers."""
    from pytest_fxtr._cells import cluster_labels
    from pytest_fxtr._evals import MARKER, item_keys, parse_marker

    state = session.config.stash[STATE]
    for item in session.items:
        if item.get_closest_marker(MARKER) is None:
            continue
        nodeid = item.nodeid.split("[", 1)[0]
        ev = state.evals.get(nodeid)
        if ev is None:
            ev = state.evals[nodeid] = parse_marker(item)
        ev.items.append(item)
    for ev in state.evals.values():
        for item in ev.items:
            item_keys(ev, item)
        if ev.cluster:
            ev.clusters = cluster_labels(ev)
    if state.evals:
        _redact_logging(session.config)
        _check_store(state)
        if not state.worker:
            _header(session.config, state)
            _resolve_baselines(state)


def _redact_logging(config: pytest.Config) -> None:
    """Every log record pytest captures or shows live passes fxtr's redaction first."""
    from fxtr.secrets import RedactingFilter

    logging_plugin = config.pluginmanager.get_plugin("logging-plugin")
    for name in ("log_cli_handler", "log_file_handler", "caplog_handler", "report_handler"):
        handler = getattr(logging_plugin, name, None)
        if handler is not None and not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """In a run with evals, a report's failure text and captured sections are redacted.

    The report is redacted before any reporter sees it (terminal, ``-rA``, junitxml, xdist's
    controller), with the redaction the store uses.
    """
    report = yield
    if item.config.stash[STATE].evals:
        from fxtr.report._redaction import redact_objects, terminal_safe
        from fxtr.secrets import redact

        if report.longrepr is not None:
            text = str(report.longrepr)
            if redact(text) != text:
                report.longrepr = redact_objects(report.longrepr)
            if terminal_safe(text) != text:  # an error's text: no escape codes, no ::commands
                report.longrepr = redact_objects(report.longrepr, terminal_safe)
        report.sections = redact_objects(report.sections)
        from pytest_fxtr._cells import note_outcome

        note_outcome(item.config.stash[STATE], item, report)
    return report


def _check_store(state: State) -> None:
    """Open the store once before any job: one clear usage error when it is not a store."""
    from fxtr.store import StoreError, open_store

    try:
        store = open_store(state.settings.store)
    except StoreError as exc:  # it names the file and what to do
        msg = f"fxtr: {exc}"
        raise pytest.UsageError(msg) from None
    except Exception as exc:
        from fxtr.secrets import redact
        from fxtr.store._factory import url_without_password

        where = url_without_password(str(state.settings.store))
        msg = f"fxtr cannot open its store {where}: {type(exc).__name__}: {redact(str(exc))}"
        raise pytest.UsageError(msg) from None
    read_only = getattr(store, "read_only", None)  # why its files cannot be written
    if read_only is not None and not state.settings.dry_run:  # a dry run writes nothing
        msg = f"fxtr: {read_only} Nothing was run."
        raise pytest.UsageError(msg)


def _resolve_baselines(state: State) -> None:
    """Find each eval's baseline (``--fxtr-baseline``) before anything runs."""
    if not state.settings.baseline:
        return
    from fxtr.store import open_store
    from pytest_fxtr._gates import find_baseline

    store = open_store(state.settings.store)
    for nodeid in state.evals:
        state.baselines[nodeid] = find_baseline(
            store, state.settings.baseline, nodeid, state.run_id, state.settings.here
        )


def _progress(config: pytest.Config, state: State, ev: Any) -> Any:
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if state.worker or tr is None:
        return None
    counts = {"done": 0, "cached": 0, "failed": 0, "usd": 0.0, "unpriced": 0}
    start = last = time.monotonic()

    def on_invocation(inv: Any) -> None:
        nonlocal last
        counts["done"] += 1
        counts["cached"] += bool(inv.from_cache)
        counts["failed"] += inv.status == "failed"
        if not inv.from_cache and inv.cost_usd:
            counts["usd"] += inv.cost_usd
        if not inv.from_cache and inv.calls and inv.cost_usd is None:
            counts["unpriced"] += 1
        now = time.monotonic()
        if now - last >= 2.0:
            last = now
            line = (
                f"fxtr: {ev.workflow.name}: {counts['done']} steps done "
                f"({counts['cached']} cached, {counts['failed']} failed), "
                f"${counts['usd']:.4f}{' + n/a' if counts['unpriced'] else ''} so far, "
                f"{now - start:.0f}s"
            )
            if capman is not None:
                with capman.global_and_fixture_disabled():
                    tr.write_line(line)
            else:
                tr.write_line(line)

    return on_invocation


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """``--fxtr-dry-run``: plan and forecast every eval instead of running the tests."""
    state = session.config.stash[STATE]
    if not state.settings.dry_run or state.worker:
        return None
    if not state.evals:
        return True  # nothing runs in a dry run, and nothing fxtr has to say
    from pytest_fxtr._dryrun import plan_eval, render

    plans = [plan_eval(ev, state.settings, _loop(state)) for ev in state.evals.values()]
    state.dry_plans = plans
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        render(tr, plans)
    if state.settings.report is not None:
        from pytest_fxtr._dryrun import plans_json
        from pytest_fxtr._report import write_report

        write_report(state.settings.report, {"dry_run": plans_json(plans)})
    return True


_current: list[pytest.Item | None] = [None]
"""The item being set up (pytest runs one at a time): the ``result`` fixture reads it, so the
fixture needs no ``request`` (pytest builds a fixture definition per ``request`` asked for)."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Run the item's eval job (once per run) and take this item's slice of its output."""
    _current[0] = item
    state = item.config.stash[STATE]
    ev = state.evals.get(item.nodeid.split("[", 1)[0])
    if ev is None:
        return
    from pytest_fxtr._evals import run_job, slice_for

    if ev.job is None and ev.error is None:
        run_job(ev, state.settings, state.run_id, _progress(item.config, state, ev), _loop(state))
    if ev.error is not None:
        item.stash[_FAILURE] = (
            f"the fxtr job of {ev.nodeid} could not run: {type(ev.error).__name__}: {ev.error}"
            + unencodable_cases(ev)
        )
        item.stash[_RESULT] = None
        from fxtr.store._base import StoreOutage

        if isinstance(ev.error, StoreOutage):  # every later job would stop the same way
            item.session.shouldstop = f"fxtr: the store failed; see {item.nodeid} above"
    else:
        value, _cells, failure = slice_for(ev, item)
        item.stash[_RESULT] = value
        if failure is not None:
            item.stash[_FAILURE] = failure
    if not ev.reported:
        _report(item, state, ev)


def _report(item: pytest.Item, state: State, ev: Any) -> None:
    """Hand the eval's payload to the controller: directly, or as a report property (xdist)."""
    from pytest_fxtr._cells import item_payload

    warn_non_finite(ev)
    payload = item_payload(ev, state.settings.fail_under)
    if payload is None:
        return
    if state.worker:
        item.user_properties.append(("fxtr", json.dumps(payload, default=str)))
    else:
        state.payloads.append(payload)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """An item whose cells failed, were skipped or await review fails with the reason."""
    failure = item.stash.get(_FAILURE, None)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """Entities name themselves in node ids: a ``Case`` by its id, a ``Model`` by its name.

    Any value whose type has a callable ``__fxtr_id__`` gets the id that method returns.
    """
    make_id = getattr(type(val), "__fxtr_id__", None)
    if callable(make_id):
        from fxtr.report._redaction import escape_controls

        # pytest escapes the ids it makes itself; one from a hook is printed as given
        return escape_controls(str(make_id(val)))
    return None


@pytest.fixture
def result() -> Any:
    """This item's slice of its eval job's output (a value, or an Array over the rest dims)."""
    item = _current[0]
    if item is None or _RESULT not in item.stash:
        nodeid = "this test" if item is None else item.nodeid
        msg = (
            f"{nodeid} uses the `result` fixture but is not an fxtr eval: mark it "
            "@pytest.mark.fxtr(workflow, ...) and parametrize it."
        )
        raise pytest.UsageError(msg)
    return item.stash[_RESULT]


class _Reports:
    """Collects eval payloads from reports (on the controller under xdist)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self, warning_message: Any) -> None:
        """A warning in pytest's warnings summary is redacted (in a run with evals)."""
        if not self.config.stash[STATE].evals:
            return
        from fxtr.secrets import redact

        message = warning_message.message
        text = str(message)
        if redact(text) == text:
            return
        try:
            warning_message.message = type(message)(redact(text))
        except Exception:  # a warning class that needs other arguments
            warning_message.message = Warning(redact(text))
        if warning_message.line:
            warning_message.line = redact(warning_message.line)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown" or not report.user_properties:
            return
        state = self.config.stash[STATE]
        for name, value in report.user_properties:
            if name == "fxtr":
                state.payloads.append(json.loads(str(value)))
                if not state.worker:
                    _header(self.config, state)
            elif name == "fxtr-outcome" and not state.worker:
                state.outcomes.append(json.loads(str(value)))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Score, compare, gate, record the outcome and write the report (controller only)."""
    state = session.config.stash[STATE]
    _current[0] = None
    if state.loop is not None:
        state.budget = getattr(state.loop, "budget", None)
        state.loop.close()
        state.loop = None
    for ev in state.evals.values():
        ev.release()
    if state.worker or not state.payloads:
        return
    from fxtr.store import open_store
    from pytest_fxtr._cells import attach_outcomes
    from pytest_fxtr._gates import evaluate, merge_payloads, store_evaluation, unscored
    from pytest_fxtr._markdown import write_markdown
    from pytest_fxtr._report import job_summary, report_json, write_report

    settings = state.settings
    store = open_store(settings.store)
    for nodeid, payload in merge_payloads(state.payloads).items():
        attach_outcomes(payload, [o for o in state.outcomes if o.get("eval") == nodeid])
        try:
            evaluation = evaluate(payload, state.baselines.get(nodeid), settings.baseline_margin)
        except ValueError as exc:  # a score the statistics refuse (say, an infinite one)
            evaluation = unscored(payload, exc)
        state.evaluations.append(evaluation)
        store_evaluation(store, evaluation)
    for job_id in dict.fromkeys(p["job_id"] for p in state.payloads if p["job_id"]):
        try:
            state.jobs[job_id] = job_summary(store, job_id)
        except KeyError:
            continue
    if settings.report is not None:
        write_report(settings.report, report_json(state.jobs, state.evaluations))
    write_markdown(settings.markdown, state.jobs, state.evaluations)
    if settings.otel and state.jobs:
        state.otel_warning = _export_otel(store, list(state.jobs))
    _junit_properties(session.config, state)
    failed = [e for e in state.evaluations if not e["gate"]["passed"]]
    if state.budget is not None and state.budget.reached:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if failed and tr is not None:  # the final "N passed" line is not green then
        missed = [f for e in failed for f in failed_gates(e)]
        key = GATE_FAILED if len(missed) == 1 else GATES_FAILED
        tr.stats.setdefault(key, []).extend(missed)


def _export_otel(store: Any, job_ids: list[str]) -> str | None:
    """Export the run's jobs (``--fxtr-otel``); the one warning when it could not, else None."""
    try:
        from fxtr.telemetry import export_jobs

        outcome = export_jobs(store, job_ids)
    except Exception as exc:  # the export never costs the run
        return f"fxtr: warning: the OpenTelemetry export failed: {type(exc).__name__}: {exc}"
    return None if outcome.ok else f"fxtr: warning: {outcome.error} The run is unaffected."


GATE_FAILED = "fxtr gate failed"
"""The terminal's outcome counter for the score gates that failed: one per group that missed
its threshold or regressed (``6 passed, 1 fxtr gate failed``)."""
GATES_FAILED = "fxtr gates failed"
"""The same counter when more than one gate failed (``6 passed, 2 fxtr gates failed``)."""


def failed_gates(evaluation: dict[str, Any]) -> list[_GateFailure]:
    """One entry per score gate that failed.

    Each group below its threshold or with a case missing, each regressed group (once when
    both), or the eval itself when its scores could not be computed.
    """
    from pytest_fxtr._gates import describe

    gate = evaluation["gate"]
    names = list(dict.fromkeys([*gate.get("failed", []), *gate.get("regressed", [])]))
    if not names:
        names = [describe({})]
    return [_GateFailure(f"{evaluation['eval']} ({name})") for name in names]


@dataclasses.dataclass
class _GateFailure:
    """One eval whose gate failed, counted in the terminal's final line."""

    eval: str
    count_towards_summary: bool = True


def _junit_properties(config: pytest.Config, state: State) -> None:
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    from pytest_fxtr._gates import describe

    for evaluation in state.evaluations:
        for g in evaluation["groups"]:
            group = describe(g["group"]).replace(", ", ",") if g["group"] else "all"
            mean = g.get("mean")
            prefix = f"fxtr:{evaluation['eval']}:{group}"
            xml.add_global_property(f"{prefix}:mean", "" if mean is None else f"{mean:.6g}")
            xml.add_global_property(f"{prefix}:passed", str(g.get("passed") is not False).lower())


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The ``fxtr summary`` section, printed once, on the controller."""
    state = config.stash[STATE]
    if not state.worker and exitstatus == pytest.ExitCode.INTERRUPTED:  # Ctrl-C
        from pytest_fxtr._report import write_interrupted

        started = [ev.started_job for ev in state.evals.values() if ev.started_job]
        write_interrupted(_Redacting(terminalreporter), state.settings.store, started)
    if state.worker or not state.payloads:
        return
    from pytest_fxtr._summary import render

    reporter = _Redacting(terminalreporter)
    if state.otel_warning:
        reporter.write_line(state.otel_warning, yellow=True)
    # the misses come first: the summary's last line (a gate, a regression, a budget) stays last
    if state.settings.explain_misses:
        from fxtr.experiment._why import miss_lines

        reporter.section("fxtr cache misses", sep="-")
        for job_id, info in state.jobs.items():
            lines = miss_lines(info["invocations"], config.getoption("verbose"))
            reporter.write_line(f"job {job_id}:" + ("" if lines else " nothing ran"))
            for line in lines:
                reporter.write_line("  " + line)

    render(
        reporter,
        state.jobs,
        state.evaluations,
        config.getoption("verbose"),
        budget=state.budget,
    )


class _Redacting:
    """The terminal reporter, with the text of each line it is given redacted."""

    def __init__(self, reporter: Any) -> None:
        self._reporter = reporter

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._reporter, name)
        if name not in ("write", "write_line", "line", "section", "write_sep", "rewrite"):
            return attr
        from fxtr.report._redaction import terminal_safe
        from fxtr.secrets import redact

        def redacted(*args: Any, **kwargs: Any) -> Any:
            safe = (terminal_safe(redact(a)) if isinstance(a, str) else a for a in args)
            return attr(*safe, **kwargs)

        return redacted
