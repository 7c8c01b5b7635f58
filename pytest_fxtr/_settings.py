"""The plugin's options: every ``--fxtr-x`` has an ``fxtr_x`` ini twin, CLI over ini."""

from __future__ import annotations

import dataclasses
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
            f"conflicts={self.conflict}",
            f"verify={'on' if self.verify else 'off'}",
            f"concurrency={self.concurrency}",
        ]
        if self.resume:
            parts.append("resume=on")
        if self.fail_under is not None:
            parts.append(f"fail-under={self.fail_under:g}")
        if self.executor:
            parts.append(f"executor={self.executor}")
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
        help="review (default) or overwrite cached results computed from other inputs or code",
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
    parser.addini("fxtr_resume", "resume the last job of each eval", type="bool", default=False)
    parser.addini("fxtr_cache_dir", "the fxtr store directory", default=None)
    parser.addini("fxtr_cache_conflict", "review or overwrite", default=None)
    parser.addini("fxtr_no_verify", "skip determinism verification", type="bool", default=False)
    parser.addini("fxtr_concurrency", "steps that run at once per job", default=None)
    parser.addini("fxtr_fail_under", "default score threshold", default=None)
    parser.addini("fxtr_report", "JSON report path", default=None)
    parser.addini("fxtr_executor", "dask://HOST:PORT or dask://local", default=None)
    parser.addini("fxtr_store", "postgresql:// URL of a shared store", default=None)


def _pick(config: pytest.Config, name: str) -> Any:
    value = config.getoption(f"--fxtr-{name.replace('_', '-')}")
    if value is None:
        value = config.getini(f"fxtr_{name}")
    return value


def resolve(config: pytest.Config) -> Settings:
    """Resolve every option once, CLI over ini; bad values are a ``pytest.UsageError``.

    Raises:
        pytest.UsageError: listing every bad value and the valid choices.
    """
    problems: list[str] = []
    conflict = _pick(config, "cache_conflict") or "review"
    if conflict not in CONFLICTS:
        problems.append(
            f"{conflict!r} is not a valid fxtr cache conflict policy. Valid policies: "
            f"{', '.join(CONFLICTS)}."
        )
    concurrency_raw = _pick(config, "concurrency") or 32
    try:
        concurrency = int(concurrency_raw)
        if concurrency < 1:
            raise ValueError
    except (TypeError, ValueError):
        problems.append(
            f"--fxtr-concurrency must be a positive whole number, got {concurrency_raw!r}."
        )
        concurrency = 32
    fail_raw = _pick(config, "fail_under")
    fail_under: float | None = None
    if fail_raw not in (None, ""):
        try:
            fail_under = float(fail_raw)
        except (TypeError, ValueError):
            problems.append(f"--fxtr-fail-under must be a number, got {fail_raw!r}.")
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
    if problems:
        raise pytest.UsageError("\n".join(problems))
    invocation_dir = Path(config.invocation_params.dir)
    cache_dir = _pick(config, "cache_dir")
    if cache_dir:
        store = (invocation_dir / cache_dir).resolve()
    else:
        store = Path(config.rootpath) / ".fxtr"
    report_raw = _pick(config, "report")
    return Settings(
        store=store_url or store,
        conflict=conflict,
        verify=not bool(_pick(config, "no_verify")),
        resume=bool(_pick(config, "resume")),
        concurrency=concurrency,
        fail_under=fail_under,
        report=(invocation_dir / report_raw).resolve() if report_raw else None,
        executor=executor,
    )
