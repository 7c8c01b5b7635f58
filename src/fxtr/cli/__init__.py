"""The ``fxtr`` command: jobs, show, resume, cache, export and the viewer, over a store.

Exit codes: 0 success; 1 an error or a job that did not succeed; 2 bad usage (argparse's).
Errors go to stderr as one sentence that ends in the fix. Nothing is created where no store
exists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fxtr.report import format_usd
from fxtr.store import Store, is_url, open_store

__all__ = ["main"]


class CommandError(Exception):
    """A failure to report on stderr with exit code 1."""


def _store(args: argparse.Namespace) -> Store:
    raw = getattr(args, "store", None) or ".fxtr"
    if is_url(raw):
        try:
            opened: Store = open_store(raw)
        except ImportError as exc:
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
    store: Store = open_store(path)
    return store


def _job(store: Store, job_id: str) -> Any:
    from fxtr.report import load_job

    try:
        return load_job(store, job_id)
    except KeyError:
        msg = f"no job {job_id!r} in the store at {store.path}. `fxtr jobs` lists them."
        raise CommandError(msg) from None


def cmd_jobs(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from fxtr.report import job_row, load_job

    store = _store(args)
    rows = [job_row(load_job(store, r["job_id"])) for r in store.iter_jobs()]
    rows = [
        r
        for r in rows
        if (not args.status or r["status"] == args.status)
        and (not args.workflow or args.workflow in (r["workflow"] or ""))
    ]
    rows.sort(key=lambda r: r["started"] or "")
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no jobs in {store.path}")
        return 0
    table = [
        [
            r["job_id"],
            r["workflow"],
            r["status"],
            r["attempts"],
            r["ran"],
            r["cached"],
            r["failed"],
            r["tokens"],
            format_usd(r["cost_usd"]),
            r["started"],
            r["commit"] or "-",
        ]
        for r in rows
    ]
    print(
        tabulate(
            table,
            headers=[
                "job",
                "workflow",
                "status",
                "attempts",
                "ran",
                "cached",
                "failed",
                "tokens",
                "cost",
                "started",
                "commit",
            ],
        )
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from fxtr.report import job_row, operation_graph

    store = _store(args)
    view = _job(store, args.job)
    row = job_row(view)
    graph = operation_graph(view)
    print(
        f"job {row['job_id']} · {row['workflow']} · attempt {row['attempts']} · {row['status']}"
        + (f" · commit {row['commit']}" if row["commit"] else "")
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
                extra += f" · {tokens} tokens · {format_usd(n['cost_usd'])}"
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
    failed = [
        inv
        for _, inv in sorted(view.invocations.items())
        if inv["status"] in ("failed", "needs_review")
    ]
    if failed:
        print("\nfailures:")
        for inv in failed if args.verbose else failed[:20]:
            print(f"  {inv['address']}: {inv.get('reason') or inv['status']}: {inv.get('error')}")
        if len(failed) > 20 and not args.verbose:
            print(f"  … {len(failed) - 20} more (-v lists all)")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from fxtr.experiment._jobs import resume

    store = _store(args)
    _job(store, args.job)
    sys.path.insert(0, str(Path.cwd()))
    try:
        result = asyncio.run(
            resume(
                args.job,
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
    return 0 if result.status == "succeeded" else 1


def cmd_cache(args: argparse.Namespace) -> int:
    store = _store(args)
    action = args.action or "stats"
    if action == "stats":
        volume = store.volume()
        print(f"store {volume.pop('path')} · {volume.pop('bytes') / 1e6:.1f} MB")
        for name, count in volume.items():
            print(f"  {name}: {count}")
        return 0
    if action == "clear":
        count = sum(1 for _ in store.iter_entries())
        if not args.yes:
            if not sys.stdin or not sys.stdin.isatty():
                msg = f"refusing to clear {count} cache entries without confirmation; pass --yes."
                raise CommandError(msg)
            answer = input(f"Clear {count} cache entries in {store.path}? Job records stay. [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing cleared")
                return 1
        print(f"cleared {store.clear_cache()} cache entries")
        return 0
    if not args.address:
        msg = f"`fxtr cache {action}` needs an ADDRESS."
        raise CommandError(msg)
    if action == "history":
        history = store.history(args.address)
        current = store.get_entry(args.address)
        if current is None and not history:
            msg = f"no cache entry or history at {args.address!r} in {store.path}."
            raise CommandError(msg)
        rows = [(i, h) for i, h in enumerate(history)]
        for i, h in rows:
            print(
                f"[{i}] {h['fingerprint'][:16]} step {h.get('step')} version {h.get('version')} "
                f"job {h.get('job_id')} at {time.ctime(h.get('created_at') or 0)}"
            )
        if current is not None:
            print(f"[current] {current.fingerprint[:16]} job {current.meta.get('job_id')}")
        return 0
    try:
        entry = store.restore(args.address, args.index)
    except KeyError as exc:
        raise CommandError(str(exc.args[0])) from None
    print(
        f"restored {args.address} to {entry['fingerprint'][:16]} (the replaced entry went to "
        "the history)"
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from fxtr.report import job_report

    store = _store(args)
    document = {"jobs": [job_report(_job(store, job)) for job in args.job]}
    text = json.dumps(document, indent=2, default=str)
    if args.output:
        Path(args.output).write_text(text + "\n")
    else:
        print(text)
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from fxtr.cli._server import export_html, serve

    store = _store(args)
    if args.export:
        _job(store, args.export)
        html = export_html(store, args.export)
        output = Path(args.output or f"fxtr-{args.export}.html")
        output.write_text(html, encoding="utf-8")
        print(f"wrote {output}")
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
    server, thread = serve(store, args.host, args.port)
    host, port = str(server.server_address[0]), server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"fxtr viewer on http://{shown}:{port}/ (Ctrl-C to stop)", flush=True)
    try:
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def _parser() -> argparse.ArgumentParser:
    store_help = "the fxtr store directory (default: .fxtr)"
    parser = argparse.ArgumentParser(prog="fxtr", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=None, help=store_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=argparse.SUPPRESS, help=store_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("jobs", parents=[common], help="list jobs")
    p.add_argument("--status", help="only jobs with this status")
    p.add_argument("--workflow", help="only jobs whose workflow name contains this")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=cmd_jobs)

    p = sub.add_parser("show", parents=[common], help="a job's graph as a tree, with failures")
    p.add_argument("job")
    p.add_argument("-v", "--verbose", action="store_true", help="list every failure")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("resume", parents=[common], help="resume a job: rerun only what failed")
    p.add_argument("job")
    p.add_argument("--conflict", choices=["review", "overwrite"], default="review")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--concurrency", type=int, default=32)
    p.set_defaults(run=cmd_resume)

    p = sub.add_parser("cache", parents=[common], help="cache size; clear, history, restore")
    p.add_argument("action", nargs="?", choices=["stats", "clear", "history", "restore"])
    p.add_argument("address", nargs="?")
    p.add_argument("--yes", action="store_true", help="clear without asking")
    p.add_argument("--index", type=int, default=-1, help="which history entry to restore")
    p.set_defaults(run=cmd_cache)

    p = sub.add_parser("export", parents=[common], help="a job's record as JSON")
    p.add_argument("job", nargs="+")
    p.add_argument("-o", "--output", help="write to this file")
    p.set_defaults(run=cmd_export)

    p = sub.add_parser("view", parents=[common], help="the viewer in a browser")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8321, help="0 picks a free port")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    p.add_argument("--export", metavar="JOB", help="write one self-contained HTML file instead")
    p.add_argument("-o", "--output", help="the file --export writes")
    p.set_defaults(run=cmd_view)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fxtr`` command."""
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except CommandError as exc:
        print(f"fxtr: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
