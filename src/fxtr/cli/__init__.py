"""The ``fxtr`` command: jobs, show, resume, cache, export and the viewer, over a store.

Exit codes: 0 success; 1 an error or a job that did not succeed; 2 bad usage (argparse's).
Errors go to stderr as one sentence that ends in the fix. Nothing is created where no store
exists.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fxtr.report import format_usd
from fxtr.report._redaction import RedactingStream, escape_controls, redacted_json
from fxtr.store import Store, StoreError, is_url, open_store

__all__ = ["main"]


class CommandError(Exception):
    """A failure to report on stderr with exit code 1."""


class UsageError(CommandError):
    """A command given arguments that make no sense together: exit code 2, like argparse's."""


def _store(args: argparse.Namespace) -> Store:
    raw = getattr(args, "store", None)
    if raw is None:
        from fxtr.report import find_store

        found = find_store(Path.cwd())
        if found is None:
            msg = (
                f"no fxtr store in {Path.cwd()} or its parents (looked for a .fxtr folder). "
                "Run a job first, or pass --store PATH."
            )
            raise CommandError(msg)
        raw = str(found)
    if is_url(raw):
        try:
            opened: Store = open_store(raw)
        except (ImportError, StoreError) as exc:  # their words name the URL and the fix
            raise CommandError(str(exc)) from None
        except Exception as exc:  # the server refused or is not there
            from fxtr.store._postgres import redacted

            msg = f"cannot open the store at {redacted(raw)}: {type(exc).__name__}: {exc}"
            raise CommandError(msg) from None
        return opened
    if "://" in raw:
        msg = f"store {raw!r} is not a directory or a postgresql:// URL."
        raise CommandError(msg)
    path = Path(raw).resolve()
    if not (path / "cache").is_dir():
        msg = (
            f"no fxtr store at {path} (looked for {path / 'cache'}). Run a job first, or pass "
            "--store PATH."
        )
        raise CommandError(msg)
    try:
        store: Store = open_store(path)
    except Exception as exc:  # a folder that is not a store (a garbled cache.db)
        from fxtr.experiment.errors import FxtrError

        if isinstance(exc, FxtrError):  # the store's own words, with their fix
            raise CommandError(str(exc)) from None
        msg = (
            f"cannot open the store at {path}: {type(exc).__name__}: {exc}. If it is damaged, "
            f"move it aside (mv {path} {path}.broken) to start a new one, or pass --store PATH."
        )
        raise CommandError(msg) from None
    return store


def _job_id(store: Store, ref: str) -> str:
    """The job a name given on the command line means (id, unique prefix or ``latest``)."""
    from fxtr.report import resolve_job

    try:
        return resolve_job(store, ref)
    except KeyError as exc:
        raise CommandError(str(exc.args[0])) from None


def _job(store: Store, ref: str) -> Any:
    from fxtr.report import load_job

    job_id = _job_id(store, ref)
    try:
        return load_job(store, job_id)
    except KeyError:
        msg = f"no job {job_id!r} in the store at {store.path}. `fxtr jobs` lists them."
        raise CommandError(msg) from None
    except ValueError as exc:  # a damaged record
        msg = f"the record of job {job_id!r} in {store.path} is damaged ({exc})."
        raise CommandError(msg) from None


def _print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, credentials redacted as data (not as lines)."""
    text = redacted_json(data, indent=2) + "\n"
    stream = sys.stdout
    if isinstance(stream, RedactingStream):
        stream.write_verbatim(text)
    else:
        stream.write(text)


JOB_STATUSES = ("succeeded", "failed", "needs_review", "error", "running", "interrupted")
"""What an attempt of a job can end as (``running`` while it runs, ``interrupted`` when its
process died before it ended)."""


def cmd_jobs(args: argparse.Namespace) -> int:
    from fxtr.report import attempt_status, job_records, job_row, newest_first, view_of

    if args.status and args.status not in JOB_STATUSES:
        msg = f"--status {args.status!r} is not a job status; valid: {', '.join(JOB_STATUSES)}."
        raise CommandError(msg)
    if args.limit < 0:
        msg = f"--limit {args.limit} is negative; give 0 for every job or a positive count."
        raise CommandError(msg)
    store = _store(args)
    records = newest_first(list(job_records(store)))
    rows: list[dict[str, Any]] = []
    damaged: list[str] = []
    for record in records:
        if args.status and attempt_status(record) != args.status:
            continue
        if args.workflow and args.workflow not in (record.get("workflow") or ""):
            continue
        try:
            # the record read once; its summary, not its invocation records (when it has one)
            rows.append(job_row(view_of(store, record)))
        except (KeyError, ValueError, TypeError) as exc:  # a damaged record: list the others
            damaged.append(f"  {record['job_id']}: {type(exc).__name__}: {exc}")
            continue
        if args.limit and len(rows) >= args.limit:
            break
    if damaged:
        lines = [
            f"fxtr: skipped {len(damaged)} damaged job record(s) in {store.path} (the others "
            "are listed; restore the store from a backup to read them):",
            *damaged,
        ]
        print("\n".join(lines), file=sys.stderr)
    if args.json:
        _print_json(rows)
        return 0
    if not rows:
        print(f"no jobs in {store.path}" + (" that match" if args.status or args.workflow else ""))
        return 0
    from fxtr.cli._jobs import jobs_table

    print(jobs_table(rows, wide=args.wide))
    if args.limit and len(rows) == args.limit and len(records) > args.limit:
        print(f"(the newest {args.limit}; --limit 0 lists all {len(records)})")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from fxtr.report import format_cost, job_row, operation_graph

    store = _store(args)
    view = _job(store, args.job)
    row = job_row(view)
    graph = operation_graph(view)
    from fxtr.report._names import job_title

    print(
        f"{job_title(view.record)} · job {row['job_id']} · attempt {row['attempts']} · "
        f"{row['status']}" + (f" · commit {row['commit']}" if row["commit"] else "")
    )
    print(
        f"{row['ran']} ran, {row['cached']} cached, {row['failed']} failed · "
        f"{row['tokens']} tokens · {format_usd(row['cost_usd'])}"
    )
    children: dict[str | None, list[dict[str, Any]]] = {}
    ids = {n["id"] for n in graph["nodes"]}
    for n in graph["nodes"]:
        children.setdefault(n["parent"] if n["parent"] in ids else None, []).append(n)

    def line(n: dict[str, Any]) -> str:
        counts = ", ".join(f"{v} {k}" for k, v in sorted(n["counts"].items()))
        callee = f" ({n['callee']})" if n.get("callee") and n["callee"] != n["name"] else ""
        extra = ""
        if n["kind"] == "step" and n["invocations"]:
            extra = f" · {n['ran']} ran, {n['cached']} cached"
            tokens = n["input_tokens"] + n["output_tokens"]
            if tokens:
                extra += f" · {tokens} tokens · {format_cost(n['cost_usd'], n['unpriced'])}"
        reasons = (
            " · reasons: " + ", ".join(f"{k} {v}" for k, v in n["reasons"].items())
            if n["reasons"]
            else ""
        )
        return f"{n['name']}{callee} [{n['kind']}] {counts or 'nothing ran'}{extra}{reasons}"

    def walk(parent: str | None, prefix: str) -> None:
        nodes = children.get(parent, [])
        for i, n in enumerate(nodes):
            last = i == len(nodes) - 1
            print(prefix + ("└─ " if last else "├─ ") + line(n))
            walk(n["id"], prefix + ("   " if last else "│  "))

    walk(None, "")
    from fxtr.report._names import interrupted_lines

    for text in interrupted_lines(view.record):
        print(text)
    _print_evaluation(view.record)
    failed = [  # from the status index: the succeeded records are not read
        inv
        for _, inv in sorted(view.unfinished().items())
        if inv["status"] in ("failed", "needs_review")
    ]
    if failed:
        print("\nfailures:")
        for inv in failed if args.verbose else failed[:20]:
            error = escape_controls(str(inv.get("error")))  # one line, no escape codes
            address = escape_controls(inv["address"])
            print(f"  {address}: {inv.get('reason') or inv['status']}: {error}")
        if len(failed) > 20 and not args.verbose:
            print(f"  … {len(failed) - 20} more (-v lists all)")
    if args.verbose:  # every address, as `fxtr cache history ADDRESS` takes them
        print("\ninvocations:")
        for address, inv in sorted(view.invocations.items()):
            cached = " (cached)" if inv.get("from_cache") else ""
            print(f"  {inv['status']}{cached} {escape_controls(address)}")
    return 0


def _print_evaluation(record: dict[str, Any]) -> None:
    """An eval job's score groups and gate, under its tree."""
    from fxtr.report._evals import (
        evaluation_of,
        format_interval,
        format_score,
        gate_label,
        key_label,
    )

    evaluation = evaluation_of(record)
    if evaluation is None:
        return
    print(f"\neval {evaluation.get('eval')} · {gate_label(record) or 'not gated'}")
    for group in evaluation.get("groups") or []:
        low, high = group.get("low"), group.get("high")
        interval = f" {format_interval(low, high)}" if low is not None else ""
        threshold = group.get("threshold")
        gate = "" if threshold is None else f" · threshold {format_score(threshold)}"
        verdict = "" if threshold is None else (" passed" if group.get("passed") else " FAILED")
        print(
            f"  {key_label(group.get('group') or {})}: mean {format_score(group.get('mean'))}"
            f"{interval} · n={group.get('n')} · missing {group.get('missing') or 0}{gate}{verdict}"
        )
    from fxtr.cli._jobs import judge_figures

    for line in judge_figures(evaluation):
        print(line)


def cmd_resume(args: argparse.Namespace) -> int:
    from fxtr.experiment._jobs import resume

    store = _store(args)
    job_id = _job(store, args.job).job_id
    sys.path.insert(0, str(Path.cwd()))
    origin = store.get_job(job_id).get("origin") or {}
    if origin.get("kind") == "pytest":
        from fxtr.cli._jobs import import_as_pytest

        import_as_pytest(origin, CommandError)
    try:
        result = asyncio.run(
            resume(
                job_id,
                store=store,
                conflict=args.conflict,
                verify=not args.no_verify,
                concurrency=args.concurrency,
            )
        )
    except LookupError as exc:
        raise CommandError(str(exc)) from None
    ran = sum(1 for i in result.invocations if not i.from_cache and i.started_at)
    failed = [i for i in result.invocations if i.status == "failed"]
    print(
        f"job {result.job_id} · attempt {result.attempt} · {result.status} · {ran} ran, "
        f"{len(failed)} failed"
    )
    for inv in failed:
        print(f"  {inv.address}: {inv.reason}: {inv.error}")
    gate_passed = _reevaluate(store, result)
    return 0 if result.status == "succeeded" and gate_passed is not False else 1


def _reevaluate(store: Store, result: Any) -> bool | None:
    """An eval job's scores, gate and verdicts, computed again from the resumed attempt.

    Prints the new score groups and gate as ``fxtr show`` does; ``None`` for a job that is
    not an eval.
    """
    from pytest_fxtr._gates import reevaluate

    evaluation = reevaluate(store, result.job_id, result)
    if evaluation is None:
        if store.get_job(result.job_id).get("run_tag"):  # launched by pytest, never scored
            print(
                "  note: this eval job was never scored (its pytest run stopped first); "
                "`pytest --fxtr-resume` scores and gates it"
            )
        return None
    _print_evaluation(store.get_job(result.job_id))
    for note in evaluation.get("notes") or []:
        print(f"  note: {note}")
    passed: bool = evaluation["gate"]["passed"]
    return passed


def cmd_cache(args: argparse.Namespace) -> int:
    from fxtr.cli._cache import run_cache

    return run_cache(args, _store(args), CommandError)


def cmd_export(args: argparse.Namespace) -> int:
    from fxtr.report._export import export_entry

    store = _store(args)
    try:
        document = {"jobs": [export_entry(_job(store, job)) for job in args.job]}
    except ValueError as exc:  # invocation records damaged on disk (read when needed)
        raise CommandError(str(exc)) from None
    if args.output:
        Path(args.output).write_text(redacted_json(document, indent=2) + "\n", encoding="utf-8")
    else:
        _print_json(document)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from fxtr.cli._compare import comparison_lines
    from fxtr.report._evals import evaluation_of

    store = _store(args)
    ids = [_job_id(store, ref) for ref in (args.job_a, args.job_b)]
    evaluations = []
    for job_id in ids:
        evaluation = evaluation_of(store.get_job(job_id))
        if evaluation is None:
            msg = (
                f"job {job_id} has no evaluation to compare (only jobs of fxtr-marked pytest "
                "evals record one). `fxtr jobs` shows which jobs are evals."
            )
            raise CommandError(msg)
        evaluations.append(evaluation)
    if evaluations[0].get("eval") != evaluations[1].get("eval"):
        if not args.any_eval:
            msg = (
                f"job {ids[0]} is of eval {evaluations[0].get('eval')} and job {ids[1]} of eval "
                f"{evaluations[1].get('eval')}: their cases are different questions, so a "
                "comparison would pair nothing meaningful. Compare two jobs of one eval "
                "(`fxtr jobs` lists each job's eval), or pass --any-eval to pair them by key "
                "all the same."
            )
            raise UsageError(msg)
        print(
            f"fxtr: note: A is eval {evaluations[0].get('eval')} and B is eval "
            f"{evaluations[1].get('eval')}; --any-eval pairs their cases by key all the same",
            file=sys.stderr,
        )
    a_eval, b_eval = evaluations
    if args.margin < 0 or args.margin != args.margin:
        msg = f"--margin {args.margin} must be a number of at least 0."
        raise CommandError(msg)
    if args.json:
        from fxtr.report._evals import compare_evaluations

        rows = compare_evaluations(a_eval, b_eval, margin=args.margin)
        _print_json({"a": ids[0], "b": ids[1], "groups": rows})
        regressed = any(r.get("verdict") == "regressed" for r in rows)
        return 1 if regressed and args.fail_on_regression else 0
    lines, regressed = comparison_lines(ids[0], ids[1], a_eval, b_eval, margin=args.margin)
    print("\n".join(lines))
    return 1 if regressed and args.fail_on_regression else 0


def cmd_view(args: argparse.Namespace) -> int:
    from fxtr.cli._server import export_html, serve

    if not 0 <= args.port <= 65535:
        msg = f"--port {args.port} is not a TCP port; give 1-65535, or 0 for a free one."
        raise CommandError(msg)
    store = _store(args)
    if args.export:
        from fxtr.cli._export import jobs_to_export

        try:
            job_ids = jobs_to_export(store, args.export)
        except KeyError as exc:
            raise CommandError(str(exc.args[0])) from None
        html = export_html(store, job_ids)
        output = Path(args.output or f"fxtr-{job_ids[-1]}.html")
        output.write_text(html, encoding="utf-8")
        print(f"wrote {output} ({len(job_ids)} job(s): {', '.join(job_ids)})")
        return 0
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.allow_remote:
        msg = (
            f"--host {args.host} would serve the store beyond this machine; add --allow-remote "
            "if that is what you want."
        )
        raise CommandError(msg)
    if args.allow_remote:
        print(
            f"warning: serving {store.path} on {args.host}: anyone who can reach it can read "
            "every record",
            file=sys.stderr,
        )
    page = ""
    if args.job:
        from urllib.parse import quote

        page = "job/" + quote(_job_id(store, args.job), safe="")
    server, thread = serve(store, args.host, args.port)
    host, port = str(server.server_address[0]), server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"fxtr viewer on http://{shown}:{port}/{page} (Ctrl-C to stop)", flush=True)
    try:
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


JOB_NAMES = "a job id, a unique prefix of one, or 'latest'"


def plain(text: str) -> str:
    """Help text from a docstring, without reStructuredText's markup.

    Double backquotes become single quotes (``fxtr`` -> 'fxtr'), so `fxtr --help` shows none.
    """
    return re.sub(r"``([^`]+)``", r"'\1'", text)


def _parser() -> argparse.ArgumentParser:
    store_help = (
        "the fxtr store: a directory or a postgresql:// URL (default: the nearest .fxtr in "
        "the working directory or its parents)"
    )
    parser = argparse.ArgumentParser(prog="fxtr", description=plain(__doc__.split("\n\n")[0]))
    parser.add_argument("--store", default=None, help=store_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=argparse.SUPPRESS, help=store_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("jobs", parents=[common], help="list jobs, newest first")
    p.add_argument("--status", help=f"only jobs with this status ({', '.join(JOB_STATUSES)})")
    p.add_argument(
        "--limit", type=int, default=20, help="the newest N jobs (default 20; 0 lists all)"
    )
    p.add_argument("--workflow", help="only jobs whose workflow name contains this")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--wide",
        action="store_true",
        help="every column (workflow, attempts, ran, cached, failed, tokens, started, "
        "commit), however wide; the default fits in 100 columns",
    )
    p.set_defaults(run=cmd_jobs)

    p = sub.add_parser("show", parents=[common], help="a job's graph as a tree, with failures")
    p.add_argument("job", metavar="JOB", help=JOB_NAMES)
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every failure, then every invocation's address (for `fxtr cache history`)",
    )
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("resume", parents=[common], help="resume a job: rerun only what failed")
    p.add_argument("job", metavar="JOB", help=JOB_NAMES)
    p.add_argument("--conflict", choices=["review", "overwrite"], default="review")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--concurrency", type=int, default=32)
    p.set_defaults(run=cmd_resume)

    from fxtr.cli._cache import add_cache_parser

    add_cache_parser(sub, common, cmd_cache)

    p = sub.add_parser("export", parents=[common], help="a job's record as JSON")
    p.add_argument("job", nargs="+", metavar="JOB", help=JOB_NAMES)
    p.add_argument("-o", "--output", help="write to this file")
    p.set_defaults(run=cmd_export)

    p = sub.add_parser(
        "compare",
        parents=[common],
        help="job B against job A per group: means, delta, interval, flipped cases, verdict",
        description="Compare two eval jobs as --fxtr-baseline does: cases paired by key, per "
        "group the baseline (A) mean, B's mean, the paired difference with its interval, the "
        "paired count, the cases that flipped, the minimum detectable effect and a verdict. "
        f"JOB_A and JOB_B are {JOB_NAMES}.",
    )
    p.add_argument("job_a", metavar="JOB_A", help="the baseline")
    p.add_argument("job_b", metavar="JOB_B", help="the job compared against it")
    p.add_argument(
        "--margin", type=float, default=0.0, help="regressed only below -margin (default 0)"
    )
    p.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when a group regressed"
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument(
        "--any-eval",
        action="store_true",
        help="compare jobs of two different evals (pairing their cases by key); without it "
        "that is a usage error",
    )
    p.set_defaults(run=cmd_compare)

    p = sub.add_parser("view", parents=[common], help="the viewer in a browser")
    p.add_argument(
        "job", nargs="?", metavar="JOB", help=f"print the URL of this job's page ({JOB_NAMES})"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8321, help="1-65535; 0 picks a free port")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    p.add_argument(
        "--export",
        metavar="JOB",
        help=f"write one self-contained HTML file of JOB ({JOB_NAMES}); 'latest' writes every "
        "job of the newest job's pytest session, each eval of the run",
    )
    p.add_argument("-o", "--output", help="the file --export writes")
    p.set_defaults(run=cmd_view)

    from fxtr.cli._calibrate import add_parser as add_calibrate  # DESIGN §15's A/A control
    add_calibrate(sub, common, (_store, _job_id, _print_json, CommandError))
    from fxtr.cli._arrays import add_parser as add_arrays  # DESIGN §19's project arrays

    add_arrays(sub, common, (_store, _print_json, CommandError))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fxtr`` command."""
    # everything the command prints (records' errors, logs, results) passes one redaction
    out, err = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        args = _parser().parse_args(argv)
        with warnings.catch_warnings():
            # the library's notices (a damaged record skipped, ...) as one line each on stderr
            warnings.simplefilter("default")
            warnings.showwarning = _show_warning
            try:
                code: int = args.run(args)
            except CommandError as exc:
                print(f"fxtr: {exc}", file=sys.stderr)
                return 2 if isinstance(exc, UsageError) else 1
            except StoreError as exc:  # a store that cannot be written: its words, its fix
                print(f"fxtr: {exc}", file=sys.stderr)
                return 1
        return code
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = out.stream, err.stream


def _show_warning(message: Warning | str, *args: Any, **kwargs: Any) -> None:
    print(f"fxtr: warning: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
