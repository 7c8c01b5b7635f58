"""The plugin's options: every ``--fxtr-x`` has an ``fxtr_x`` ini twin, CLI over ini."""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

CONFLICTS = ("review", "overwrite")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The resolved fxtr settings of one pytest run."""

    store: Path | str
    """The project store: ``<rootdir>/.fxtr`` unless moved, or a ``postgresql://`` URL."""
    conflict: str
    verify: bool
    resume: bool
    concurrency: int
    fail_under: float | None
    report: Path | None
    executor: str | None = None
    """``dask://local`` or ``dask://HOST:PORT``; ``None`` runs steps on this process's loop."""
    samples: int | None = None
    """``--fxtr-samples``: the value of every eval's workflow input named ``samples``."""
    baseline: str | None = None
    """``--fxtr-baseline``: a job id, a unique prefix, ``latest`` or a report JSON path."""
    baseline_margin: float = 0.0
    """A group regresses when its whole difference interval lies below ``-margin``."""
    markdown: Path | None = None
    """``--fxtr-markdown``: where to write the summary as Markdown."""
    otel: bool = False
    """``--fxtr-otel``: export each job as OpenTelemetry traces when the run ends."""
    here: Path = Path()
    """The invocation directory: relative paths given to options start here."""
    dry_run: bool = False
    """``--fxtr-dry-run``: plan and forecast every eval; run, spend and write nothing."""
    max_cost: float | None = None
    """``--fxtr-max-cost``: dollars the run's model calls may spend."""
    batch: bool = False
    """``--fxtr-batch``: single-turn kit calls go through the provider's batch API."""
    batch_size: int | None = None
    """``--fxtr-batch-size``: requests per provider batch (default 1,000)."""
    batch_delay: float | None = None
    """``--fxtr-batch-delay``: seconds a batch waits for more requests (default 5)."""
    cache_keep: int = 20
    """``--fxtr-cache-keep``: entries each address keeps, one per fingerprint."""
    explain_misses: bool = False
    """``--fxtr-explain-misses``: say per step why the invocations that ran were not cached."""
    conflict_from_ci: bool = False
    """The conflict policy is ``overwrite`` because ``CI=true`` and nobody asked for one."""

    def _where(self) -> str:
        if isinstance(self.store, str):
            from urllib.parse import urlsplit, urlunsplit

            parts = urlsplit(self.store)
            if parts.password:
                parts = parts._replace(netloc=parts.netloc.replace(parts.password, "***"))
            return urlunsplit(parts)
        return str(self.store / "cache")

    def header(self) -> str:
        """The one header line."""
        parts = [
            f"cache={self._where()}",
            f"conflicts={self.conflict}" + (" (CI=true)" if self.conflict_from_ci else ""),
            f"verify={'on' if self.verify else 'off'}",
            f"concurrency={self.concurrency}",
        ]
        if self.cache_keep != 20:
            parts.append(f"keep={self.cache_keep}")
        if self.resume:
            parts.append("resume=on")
        if self.fail_under is not None:
            parts.append(f"fail-under={self.fail_under:g}")
        if self.executor:
            parts.append(f"executor={self.executor}")
        if self.samples is not None:
            parts.append(f"samples={self.samples}")
        if self.dry_run:
            parts.append("dry-run=on")
        if self.max_cost is not None:
            parts.append(f"max-cost=${self.max_cost:g}")
        if self.batch:
            parts.append("batch=on")
        if self.baseline:
            margin = f" (margin {self.baseline_margin:g})" if self.baseline_margin else ""
            parts.append(f"baseline={self.baseline}{margin}")
        return "fxtr: " + ", ".join(parts)


def add_options(parser: pytest.Parser) -> None:
    """Register the ``--fxtr-*`` options and their ini twins."""
    group = parser.getgroup("fxtr", "fxtr evaluation harness")
    group.addoption(
        "--fxtr-resume",
        action="store_true",
        default=None,
        help="resume the last job of each eval: only failed steps run",
    )
    group.addoption(
        "--fxtr-cache-dir",
        default=None,
        metavar="PATH",
        help="the fxtr store (default: <rootdir>/.fxtr)",
    )
    group.addoption(
        "--fxtr-cache-conflict",
        default=None,
        metavar="POLICY",
        help="review or overwrite cached results computed from other inputs or code (default: "
        "review; overwrite under CI=true, the old entries kept)",
    )
    group.addoption(
        "--fxtr-no-verify",
        action="store_true",
        default=None,
        help="do not replay workflows to verify they are deterministic",
    )
    group.addoption(
        "--fxtr-concurrency",
        default=None,
        metavar="N",
        help="steps that run at once per job (default: 32)",
    )
    group.addoption(
        "--fxtr-fail-under",
        default=None,
        metavar="SCORE",
        help="default threshold for the mean score of every group",
    )
    group.addoption(
        "--fxtr-report",
        default=None,
        metavar="PATH",
        help="write a JSON report of jobs, invocations, cost and scores",
    )
    group.addoption(
        "--fxtr-store",
        default=None,
        metavar="URL",
        help="a shared store: postgresql://USER@HOST/DB (credentials: the URL or PG* variables)",
    )
    group.addoption(
        "--fxtr-executor",
        default=None,
        metavar="URL",
        help="run steps on a Dask cluster: dask://HOST:PORT, or dask://local",
    )
    group.addoption(
        "--fxtr-samples",
        default=None,
        metavar="K",
        help="draw K samples per case: the value of every eval's workflow input `samples`",
    )
    group.addoption(
        "--fxtr-baseline",
        default=None,
        metavar="REF",
        help="compare each eval with an earlier run: a job id, a unique prefix, `latest` "
        "(the newest earlier job of the same eval) or a --fxtr-report JSON file",
    )
    group.addoption(
        "--fxtr-baseline-margin",
        default=None,
        metavar="DELTA",
        help="a group regresses when its whole difference interval lies below -DELTA (default: 0)",
    )
    group.addoption(
        "--fxtr-markdown",
        default=None,
        metavar="PATH",
        help="write the fxtr summary as Markdown (also to $GITHUB_STEP_SUMMARY when set)",
    )
    group.addoption(
        "--fxtr-otel",
        action="store_true",
        default=None,
        help="export each job as OpenTelemetry traces (OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT; "
        "needs pytest-fxtr[otel])",
    )
    group.addoption(
        "--fxtr-dry-run",
        action="store_true",
        default=None,
        help="plan every eval against the cache and print what would run and its forecast "
        "cost; run, spend and write nothing",
    )
    group.addoption(
        "--fxtr-max-cost",
        default=None,
        metavar="USD",
        help="no model call starts that would take the run's spending past USD dollars",
    )
    group.addoption(
        "--fxtr-batch",
        action="store_true",
        default=None,
        help="send single-turn kit calls (generate, judges) through provider batch APIs",
    )
    group.addoption(
        "--fxtr-batch-size",
        default=None,
        metavar="N",
        help="requests per provider batch (default: 1000)",
    )
    group.addoption(
        "--fxtr-batch-delay",
        default=None,
        metavar="SECONDS",
        help="seconds a provider batch waits for more requests before it is sent (default: 5)",
    )
    parser.addini("fxtr_dry_run", "plan and forecast only", type="bool", default=False)
    parser.addini("fxtr_max_cost", "dollars the run may spend on model calls", default=None)
    parser.addini("fxtr_batch", "use provider batch APIs", type="bool", default=False)
    parser.addini("fxtr_batch_size", "requests per provider batch", default=None)
    parser.addini("fxtr_batch_delay", "seconds before a provider batch is sent", default=None)
    group.addoption(
        "--fxtr-cache-keep",
        default=None,
        metavar="N",
        help="entries each address keeps, one per fingerprint (default: 20); inputs that "
        "match any of them are served from it",
    )
    group.addoption(
        "--fxtr-explain-misses",
        action="store_true",
        default=None,
        help="say per step how many invocations ran because their address was new and how "
        "many because something changed, and what",
    )
    parser.addini("fxtr_cache_keep", "entries kept per address (default 20)", default=None)
    parser.addini("fxtr_explain_misses", "explain cache misses", type="bool", default=False)
    parser.addini("fxtr_resume", "resume the last job of each eval", type="bool", default=False)
    parser.addini("fxtr_cache_dir", "the fxtr store directory", default=None)
    parser.addini("fxtr_cache_conflict", "review or overwrite", default=None)
    parser.addini("fxtr_no_verify", "skip determinism verification", type="bool", default=False)
    parser.addini("fxtr_concurrency", "steps that run at once per job", default=None)
    parser.addini("fxtr_fail_under", "default score threshold", default=None)
    parser.addini("fxtr_report", "JSON report path", default=None)
    parser.addini("fxtr_executor", "dask://HOST:PORT or dask://local", default=None)
    parser.addini("fxtr_store", "postgresql:// URL of a shared store", default=None)
    parser.addini("fxtr_samples", "samples per case (workflow input `samples`)", default=None)
    parser.addini("fxtr_baseline", "job id, prefix, latest, or report JSON", default=None)
    parser.addini("fxtr_baseline_margin", "regression margin", default=None)
    parser.addini("fxtr_markdown", "Markdown summary path", default=None)
    parser.addini("fxtr_otel", "export jobs as OpenTelemetry traces", type="bool", default=False)


def _pick(config: pytest.Config, name: str) -> Any:
    value = config.getoption(f"--fxtr-{name.replace('_', '-')}")
    if value is None:
        value = config.getini(f"fxtr_{name}")
    return value


def _finite(raw: Any, option: str, problems: list[str]) -> float | None:
    """A finite number from an option's text, or ``None`` when it is not given."""
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        problems.append(f"{option} must be a number, got {raw!r}.")
        return None
    if not math.isfinite(value):
        problems.append(f"{option} must be a finite number, got {raw!r}.")
        return None
    return value


def _writable_dir(path: Path, option: str, problems: list[str]) -> None:
    """``path`` is (or can be made) a directory this process can write."""
    if path.exists() and not path.is_dir():
        problems.append(f"{option} {path} is a file, not a directory; give a directory path.")
        return
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        problems.append(f"{option} {path}: {existing} is a file; give a directory path.")
    elif not _can_write(existing):
        from fxtr.store._unwritable import write_problem

        found = write_problem(existing)
        why = f" ({found[0]})" if found else ""
        problems.append(
            f"{option} {path}: {existing} is not writable{why}; give a directory you can write."
        )


def _can_write(directory: Path) -> bool:
    """Whether a file can be created in ``directory`` (tried: permissions lie to root)."""
    if not os.access(directory, os.W_OK | os.X_OK):
        return False
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".fxtr-probe-")
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def _writable_file(path: Path, option: str, problems: list[str]) -> None:
    """``path`` is (or can be made) a file this process can write."""
    if path.is_dir():
        problems.append(f"{option} {path} is a directory; give a file path, e.g. {path}/x.json.")
        return
    if path.exists():
        if not os.access(path, os.W_OK):
            problems.append(f"{option} {path} is not writable; give a file you can write.")
        return
    _writable_dir(path.parent, option, problems)


def resolve(config: pytest.Config) -> Settings:
    """Resolve every option once, CLI over ini; bad values are a ``pytest.UsageError``.

    Paths are checked here, before anything runs: a store that is a file or not writable,
    a report or Markdown path that is a directory.

    Raises:
        pytest.UsageError: listing every bad value and the valid choices.
    """
    problems: list[str] = []
    conflict = _pick(config, "cache_conflict") or ("overwrite" if in_ci() else "review")
    if conflict not in CONFLICTS:
        problems.append(
            f"{conflict!r} is not a valid fxtr cache conflict policy. Valid policies: "
            f"{', '.join(CONFLICTS)}."
        )
    concurrency = _positive(_pick(config, "concurrency") or 32, "--fxtr-concurrency", problems)
    cache_keep = _positive(_pick(config, "cache_keep") or 20, "--fxtr-cache-keep", problems)
    fail_under = _finite(_pick(config, "fail_under"), "--fxtr-fail-under", problems)
    samples_raw = _pick(config, "samples")
    samples = (
        None if samples_raw in (None, "") else _positive(samples_raw, "--fxtr-samples", problems)
    )
    margin = _finite(_pick(config, "baseline_margin"), "--fxtr-baseline-margin", problems)
    if margin is not None and margin < 0:
        problems.append(f"--fxtr-baseline-margin must be 0 or more, got {margin:g}.")
    executor = _pick(config, "executor") or None
    if executor and not executor.startswith("dask://"):
        problems.append(
            f"{executor!r} is not a valid fxtr executor. Use dask://HOST:PORT or dask://local."
        )
    store_url = _pick(config, "store") or None
    if store_url and not store_url.startswith(("postgresql://", "postgres://")):
        problems.append(
            f"{store_url!r} is not a valid fxtr store URL. Use postgresql://USER@HOST/DB, or "
            "--fxtr-cache-dir for a directory."
        )
    invocation_dir = Path(config.invocation_params.dir)
    cache_dir = _pick(config, "cache_dir")
    if cache_dir:
        store = (invocation_dir / cache_dir).resolve()
        if not store_url and not (_pick(config, "dry_run") and store.is_dir()):
            _writable_dir(store, "--fxtr-cache-dir", problems)  # a dry run reads it only
    else:
        store = Path(config.rootpath) / ".fxtr"
    report_raw = _pick(config, "report")
    report = (invocation_dir / report_raw).resolve() if report_raw else None
    if report is not None:
        _writable_file(report, "--fxtr-report", problems)
    markdown_raw = _pick(config, "markdown")
    markdown = (invocation_dir / markdown_raw).resolve() if markdown_raw else None
    if markdown is not None:
        _writable_file(markdown, "--fxtr-markdown", problems)
    otel = bool(_pick(config, "otel"))
    if otel:
        _check_otel(problems)
    max_cost = _finite(_pick(config, "max_cost"), "--fxtr-max-cost", problems)
    if max_cost is not None and max_cost < 0:
        problems.append(
            f"--fxtr-max-cost must be 0 dollars or more, got {max_cost:g}; give the budget in "
            "US dollars, e.g. --fxtr-max-cost 5"
        )
    batch_size_raw = _pick(config, "batch_size")
    batch_size = (
        None
        if batch_size_raw in (None, "")
        else _positive(batch_size_raw, "--fxtr-batch-size", problems)
    )
    batch_delay = _finite(_pick(config, "batch_delay"), "--fxtr-batch-delay", problems)
    if batch_delay is not None and batch_delay < 0:
        problems.append(f"--fxtr-batch-delay must be 0 seconds or more, got {batch_delay:g}.")
    if problems:
        raise pytest.UsageError("\n".join(problems))
    return Settings(
        store=store_url or store,
        conflict=conflict,
        verify=not bool(_pick(config, "no_verify")),
        resume=bool(_pick(config, "resume")),
        concurrency=concurrency,
        fail_under=fail_under,
        report=report,
        executor=executor,
        samples=samples,
        baseline=_pick(config, "baseline") or None,
        baseline_margin=margin or 0.0,
        markdown=markdown,
        otel=otel,
        here=invocation_dir,
        dry_run=bool(_pick(config, "dry_run")),
        max_cost=max_cost,
        batch=bool(_pick(config, "batch")),
        batch_size=batch_size,
        batch_delay=batch_delay,
        cache_keep=cache_keep,
        explain_misses=bool(_pick(config, "explain_misses")),
        conflict_from_ci=not _pick(config, "cache_conflict") and in_ci(),
    )


def in_ci() -> bool:
    """Whether this run is a CI's (``CI=true``, as GitHub Actions and most CIs set it).

    There nobody is there to review, and a pull request exists to change inputs: the
    default conflict policy is ``overwrite`` (DESIGN §13; the old entries stay kept).
    """
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _check_otel(problems: list[str]) -> None:
    """``--fxtr-otel`` needs the SDK and its OTLP/HTTP exporter (the ``otel`` extra)."""
    import importlib.util

    for module in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            problems.append(
                f"--fxtr-otel needs {module}, which is not installed: "
                "pip install 'pytest-fxtr[otel]'."
            )
            return


def _positive(raw: Any, option: str, problems: list[str]) -> int:
    """A positive whole number from an option's text (1 when it is bad)."""
    try:
        value = int(raw)
        if value < 1:
            raise ValueError
    except (TypeError, ValueError):
        problems.append(f"{option} must be a positive whole number, got {raw!r}.")
        return 1
    return value
