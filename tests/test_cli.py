"""The `fxtr` command: every subcommand, its output, exit codes and errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fxtr import run
from fxtr.cli import main
from tests import examples
from tests.examples import evaluate, qa_inputs


@pytest.fixture
def failed_job():
    """A store with one failed job of qa.evaluate (one case's answer raised)."""
    examples.CALLS.clear()
    examples.FAIL.clear()
    examples.FAIL.add("capital of france")
    try:
        result = run(evaluate, qa_inputs(models=("a",)))
    finally:
        examples.FAIL.clear()
    return result.job_id


def test_missing_store_is_an_error_and_creates_nothing(tmp_path, capsys):
    """Every command on a missing store exits 1, names the path and creates nothing."""
    for command in (["jobs"], ["show", "x"], ["cache"], ["export", "x"], ["view"]):
        assert main(["--store", str(tmp_path / "nope"), *command]) == 1
    err = capsys.readouterr().err
    assert f"no fxtr store at {tmp_path / 'nope'}" in err and "--store PATH" in err
    assert not (tmp_path / "nope").exists()


def test_jobs_lists_columns_and_filters(failed_job, capsys):
    """`fxtr jobs` shows id, eval or workflow, status, gate and cost; --wide every column."""
    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert "job" in out and "workflow" in out and "gate" in out and "cost" in out
    assert failed_job in out and "qa.evaluate" in out and "failed" in out
    assert main(["jobs", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "attempts" in out and "tokens" in out and "commit" in out and failed_job in out
    assert main(["jobs", "--status", "succeeded"]) == 0
    assert failed_job not in capsys.readouterr().out
    assert main(["jobs", "--json", "--store", ".fxtr"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["failed"] == 1 and row["ran"] == 3 and row["attempts"] == 1


def test_show_prints_the_tree_and_failures(failed_job, capsys):
    """`fxtr show JOB` prints workflows and operations as a tree, then failures with reasons."""
    assert main(["show", failed_job]) == 0
    out = capsys.readouterr().out
    assert "└─ qa.evaluate [workflow]" in out
    assert "answer (qa.answer) [step] 1 failed, 1 succeeded" in out
    assert "reasons: tool_error 1" in out
    assert "failures:\n  qa.evaluate/answer[model=a,prompt=p2]: tool_error: ConnectionError" in out


def test_unknown_job_names_the_store(failed_job, capsys):
    """An unknown job id exits 1 and says how to list jobs."""
    assert main(["show", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No job 'nope' in the store at" in err
    assert "`fxtr jobs` lists the jobs" in err


def test_resume_reruns_the_failed_line(failed_job, capsys):
    """`fxtr resume JOB` runs attempt 2; exit 0 when it succeeds."""
    examples.CALLS.clear()
    assert main(["resume", failed_job]) == 0
    assert "attempt 2 · succeeded · 3 ran, 0 failed" in capsys.readouterr().out
    assert sorted(examples.CALLS) == [
        "qa.evaluate/answer[model=a,prompt=p2]",
        "qa.evaluate/score[model=a,prompt=p2]",
        "qa.evaluate/summarize[model=a]/mean",
    ]


def test_resume_of_a_workflow_that_cannot_be_imported(failed_job, capsys):
    """A record whose workflow moved is a clear error naming the path."""
    from fxtr.store import open_store

    store = open_store(".fxtr")
    record = store.get_job(failed_job)
    record.update(workflow_path="gone.module:evaluate", workflow_file=None)
    store.put_job(record)
    assert main(["resume", failed_job]) == 1
    err = capsys.readouterr().err
    assert "'gone.module:evaluate' can no longer be imported" in err


def test_export_uses_the_report_schema(failed_job, capsys, tmp_path):
    """`fxtr export JOB` writes the --fxtr-report schema."""
    assert main(["export", failed_job, "-o", str(tmp_path / "out.json")]) == 0
    (job,) = json.loads((tmp_path / "out.json").read_text())["jobs"]
    report_keys = {"job_id", "workflow", "status", "attempt", "invocations", "cost", "scores"}
    assert set(job) == report_keys | {"inputs", "commit", "entities"}
    assert job["status"] == "failed"
    assert {"address", "step", "status", "from_cache", "reason", "error"} <= set(
        job["invocations"][0]
    )


def test_cache_stats_history_restore_and_clear(failed_job, capsys, monkeypatch):
    """`fxtr cache` counts; history and restore follow an overwrite; clear asks first."""
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "cache entries: 2" in out and "jobs: 1" in out
    run(
        evaluate,
        qa_inputs({"p1": "what is two plus three", "p2": "capital of france"}, models=("a",)),
        conflict="overwrite",
    )
    address = "qa.evaluate/answer[model=a,prompt=p1]"
    assert main(["cache", "history", address]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[current] ") and "\n[0] " in out  # newest first
    assert "changed from the next: question; result differs" in out
    assert main(["cache", "restore", address]) == 0
    assert f"restored {address}" in capsys.readouterr().out
    assert main(["cache", "history", "qa.evaluate/nothing"]) == 1
    assert "no cache entry at" in capsys.readouterr().err
    assert main(["cache", "restore", "qa.evaluate/answer[model=a,prompt=p2]"]) == 1
    assert "No history" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", None)
    assert main(["cache", "clear"]) == 1
    assert "pass --yes" in capsys.readouterr().err
    assert main(["cache", "clear", "--yes"]) == 0
    assert "cleared" in capsys.readouterr().out
    assert main(["jobs"]) == 0  # job records stay


def test_store_option_before_or_after_the_command(failed_job, capsys, tmp_path):
    """--store works before and after the subcommand."""
    store = str(Path(".fxtr").resolve())
    assert main(["--store", store, "jobs"]) == 0
    assert main(["jobs", "--store", store]) == 0
    assert capsys.readouterr().out.count(failed_job) == 2


def test_remote_host_needs_an_explicit_flag(failed_job, capsys):
    """Binding beyond loopback needs --allow-remote."""
    assert main(["view", "--host", "0.0.0.0"]) == 1
    assert "--allow-remote" in capsys.readouterr().err


def test_help_everywhere():
    """--help works for the command and every subcommand."""
    for args in ([], ["jobs"], ["show"], ["resume"], ["cache"], ["export"], ["view"], ["compare"]):
        out = subprocess.run(
            [sys.executable, "-m", "fxtr.cli", *args, "--help"], capture_output=True, text=True
        )
        assert out.returncode == 0 and "usage: fxtr" in out.stdout


def _fake_jobs(store, ids_and_times, evaluation=None):
    """Job records with chosen ids and creation times (written the way launch writes them)."""
    for job_id, created in ids_and_times:
        record = {"job_id": job_id, "workflow": "wf", "created_at": created, "attempts": []}
        if evaluation and job_id in evaluation:
            record["evaluation"] = {"eval": evaluation[job_id]}
        store.put_job(record)


def test_resolve_job_by_id_prefix_and_latest(tmp_path):
    """A full id, a unique prefix and `latest` (optionally of one eval) name one job."""
    from fxtr.report import resolve_job
    from fxtr.store import open_store

    store = open_store(tmp_path / "s")
    _fake_jobs(
        store,
        [("abc111", 100.0), ("abc222", 300.0), ("abd333", 200.0), ("abc", 50.0)],
        evaluation={"abd333": "evals/t.py::t", "abc": "evals/t.py::t"},
    )
    assert resolve_job(store, "abc111") == "abc111"
    assert resolve_job(store, "abc") == "abc"  # a full id wins over being a prefix
    assert resolve_job(store, "abc2") == "abc222"
    assert resolve_job(store, "abd") == "abd333"
    assert resolve_job(store, "latest") == "abc222"
    assert resolve_job(store, "latest", eval_key="evals/t.py::t") == "abd333"
    with pytest.raises(KeyError) as ambiguous:
        resolve_job(store, "ab")
    message = ambiguous.value.args[0]
    assert "ambiguous" in message and "4 jobs start with it" in message
    assert message.index("abc222") < message.index("abd333") < message.index("abc111")
    with pytest.raises(KeyError) as missing:
        resolve_job(store, "zzz")
    assert "No job 'zzz'" in missing.value.args[0] and "`fxtr jobs`" in missing.value.args[0]
    with pytest.raises(KeyError) as none_of_eval:
        resolve_job(store, "latest", eval_key="evals/other.py::t")
    assert "of eval 'evals/other.py::t'" in none_of_eval.value.args[0]


def test_find_store_walks_up_from_a_subfolder(tmp_path):
    """The nearest `.fxtr` upwards is found; none is None."""
    from fxtr.report import find_store

    (tmp_path / "proj" / ".fxtr").mkdir(parents=True)
    deep = tmp_path / "proj" / "a" / "b"
    deep.mkdir(parents=True)
    assert find_store(deep) == tmp_path / "proj" / ".fxtr"
    (deep / ".fxtr").mkdir()
    assert find_store(deep) == deep / ".fxtr"
    if not any((p / ".fxtr").exists() for p in tmp_path.parents):
        assert find_store(tmp_path) is None


@pytest.fixture
def eval_jobs():
    """Two eval jobs of one eval (B after A, B better on 'hard', worse on 'regress')."""
    from fxtr.store import open_store
    from tests.viewer_jobs import make_eval_job

    store = open_store(".fxtr")
    a = make_eval_job(store, samples=3)
    b = make_eval_job(store, variant="better", samples=3, baseline=a.job_id)
    return store, a.job_id, b.job_id


def test_commands_find_the_store_from_a_subfolder(failed_job, capsys, monkeypatch, tmp_path):
    """Without --store, `fxtr` uses the nearest .fxtr upwards; with none, it says so."""
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert main(["jobs"]) == 0
    assert failed_job in capsys.readouterr().out
    assert main(["show", failed_job[:6]]) == 0
    assert f"qa.evaluate · job {failed_job}" in capsys.readouterr().out
    elsewhere = tmp_path.parent / f"{tmp_path.name}-empty"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    if not any((p / ".fxtr").exists() for p in elsewhere.parents):
        assert main(["jobs"]) == 1
        err = capsys.readouterr().err
        assert f"no fxtr store in {elsewhere} or its parents" in err and "--store PATH" in err


def test_jobs_are_newest_first_limited_and_show_the_gate(failed_job, eval_jobs, capsys):
    """`fxtr jobs` lists the newest first, 20 by default, `--limit N`, and `gate failed`."""
    _, a, b = eval_jobs
    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert out.index(b) < out.index(a) < out.index(failed_job)
    lines = {line.split()[0]: line for line in out.splitlines() if line[:1].isalnum()}
    assert "gate failed" in lines[a] and "gate failed" in lines[b]
    assert "gate" not in lines[failed_job]
    assert main(["jobs", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert b in out and a not in out and "(the newest 1; --limit 0 lists all 3)" in out
    assert main(["jobs", "--json", "--limit", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["job_id"] for r in rows] == [b, a, failed_job]
    assert [r["gate"] for r in rows] == ["gate failed", "gate failed", None]


def test_twenty_jobs_by_default(tmp_path, capsys):
    """Without --limit, `fxtr jobs` shows the 20 newest of 25."""
    from fxtr.store import open_store

    store = open_store(tmp_path / ".fxtr")
    _fake_jobs(store, [(f"job{i:02d}", float(i)) for i in range(25)])
    assert main(["jobs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["job_id"] for r in rows] == [f"job{i:02d}" for i in range(24, 4, -1)]


def test_bad_status_and_port_are_one_line_naming_valid_values(failed_job, capsys):
    """`--status bogus` and `--port 99999` exit 1 with one line naming what is valid."""
    assert main(["jobs", "--status", "bogus"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'bogus' is not a job status" in err
    assert "succeeded, failed, needs_review, error, running" in err
    assert main(["view", "--port", "99999"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--port 99999" in err and "1-65535" in err and "0" in err
    assert main(["jobs", "--limit", "-3"]) == 1
    assert "--limit -3" in capsys.readouterr().err


def test_jobs_are_named_by_prefix_and_latest_everywhere(eval_jobs, capsys, tmp_path):
    """show, export and view --export accept a unique prefix and `latest`."""
    _, a, b = eval_jobs
    assert main(["show", "latest"]) == 0
    out = capsys.readouterr().out
    assert f"· job {b} ·" in out and "eval evals/test_res.py::test_res · gate failed" in out
    assert "  small: mean 0.733 · n=5 · missing 1 · threshold 0.800 FAILED" in out  # 3.67/5
    assert main(["export", a[:8], "latest", "-o", str(tmp_path / "e.json")]) == 0
    jobs = json.loads((tmp_path / "e.json").read_text())["jobs"]
    assert [j["job_id"] for j in jobs] == [a, b]
    assert main(["view", "--export", "latest", "-o", str(tmp_path / "v.html")]) == 0
    assert b in (tmp_path / "v.html").read_text()


def test_an_ambiguous_prefix_lists_the_candidates(tmp_path, capsys):
    """A prefix shared by two jobs is an error listing both."""
    from fxtr.store import open_store

    store = open_store(tmp_path / ".fxtr")
    _fake_jobs(store, [("feed01", 1.0), ("feed02", 2.0), ("beef", 3.0)])
    for command in (["show", "fe"], ["export", "fe"], ["resume", "fe"], ["compare", "fe", "beef"]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert "'fe' is ambiguous" in err and "feed01 (wf," in err and "feed02 (wf," in err


def test_a_damaged_job_record_does_not_hide_the_others(failed_job, capsys):
    """A record with broken fields is skipped with a note; the other jobs are listed."""
    from fxtr.store import open_store

    store = open_store(".fxtr")
    store.put_job({"job_id": "broken", "workflow": "wf", "created_at": 5.0, "attempts": "??"})
    assert main(["jobs"]) == 0
    captured = capsys.readouterr()
    assert failed_job in captured.out and "broken" not in captured.out
    assert "skipped 1 damaged job record(s)" in captured.err


def test_cache_restore_help_explains_its_arguments():
    """`fxtr cache restore --help` says what ADDRESS and --index are."""
    out = subprocess.run(
        [sys.executable, "-m", "fxtr.cli", "cache", "restore", "--help"],
        capture_output=True,
        text=True,
    ).stdout
    assert "usage: fxtr cache restore" in out and "ADDRESS" in out
    assert "qa.evaluate/answer[model=a,prompt=p1]" in out
    assert "0 is the oldest, -1 (the default) the newest" in out
    history = subprocess.run(
        [sys.executable, "-m", "fxtr.cli", "cache", "history", "--help"],
        capture_output=True,
        text=True,
    ).stdout
    assert "what changed from" in history


def test_a_store_that_is_not_a_store_is_one_clear_error(tmp_path, capsys):
    """A garbled cache.db makes every command exit 1 with one line naming the path and a fix."""
    store = tmp_path / "garbled" / ".fxtr"
    (store / "cache").mkdir(parents=True)
    (store / "cache" / "cache.db").write_bytes(bytes(range(256)) * 40)
    for command in (["jobs"], ["show", "latest"], ["view", "--port", "0"], ["cache"]):
        assert main(["--store", str(store), *command]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(store) in err, err
        assert "aside" in err or "--store" in err


def test_a_garbled_job_record_is_skipped_with_a_warning(failed_job, capsys):
    """A record whose stored text is not JSON is skipped with a one-line warning."""
    from fxtr.store import open_store

    store = open_store(".fxtr")
    store.jobs.set("garbled", '{"job_id": "garbled", "attem\x00')  # a value damaged on disk
    assert main(["jobs"]) == 0
    captured = capsys.readouterr()
    assert failed_job in captured.out and "garbled" not in captured.out
    assert "fxtr: warning: Skipped the damaged job record 'garbled'" in captured.err
    assert main(["show", failed_job[:5]]) == 0
    assert main(["show", "latest"]) == 0
    assert f"job {failed_job}" in capsys.readouterr().out


def test_view_serves_from_a_subfolder_and_prints_the_job_page(failed_job, tmp_path):
    """`fxtr view latest --port 0` in a subfolder serves the nearest store, naming the page."""
    import httpx

    sub = tmp_path / "deeper"
    sub.mkdir()
    with subprocess.Popen(
        [sys.executable, "-m", "fxtr.cli", "view", "latest", "--port", "0"],
        cwd=sub,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            line = process.stdout.readline()
            assert line.startswith("fxtr viewer on http://127.0.0.1:")
            assert f"/job/{failed_job} " in line
            url = line.split()[3]
            page = httpx.get(url, timeout=10)
            assert page.status_code == 200 and '<script src="/app.js">' in page.text
            head = httpx.get(url.replace("/job/", "/api/jobs/"), timeout=10).json()
            assert head["job_id"] == failed_job and head["status"] == "failed"
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_redacted_json_stays_json_and_redacts_every_string():
    """A key next to JSON escapes, in a dict key and in a non-JSON object: gone, JSON intact."""
    import base64

    from fxtr.report._redaction import redacted_json
    from fxtr.secrets import register

    key = "zq9-test-credential-" + "7" * 12
    register(key)
    b64 = base64.b64encode(key.encode()).decode()

    class Opaque:
        def __str__(self):
            return f"opaque {key}"

    data = {
        f"header {key}": [f'said "{key}"\n', "Bearer \"quoted\" \\ end", f"{b64}\\"],
        "obj": Opaque(),
        "n": 1.5,
        "clean": "é ü \u2028",
    }
    text = redacted_json(data, indent=2)
    back = json.loads(text)
    assert key not in text and b64.rstrip("=") not in text
    assert back == {
        # (a line-wise pass over the JSON text would have eaten the backslash before "quoted")
        "header [redacted]": ['said "[redacted]"\n', 'Bearer "quoted" \\ end', "[redacted]\\"],
        "obj": "opaque [redacted]",
        "n": 1.5,
        "clean": "é ü \u2028",
    }
    untouched = {"a": ["plain", 1, None, True], "b": "é"}
    assert json.loads(redacted_json(untouched)) == untouched


def test_cli_text_is_redacted_even_when_a_key_is_split_across_writes(capsys):
    """The command's stdout holds text until its line ends, so a key written in parts is found."""
    from fxtr.report._redaction import RedactingStream
    from fxtr.secrets import register

    key = "zq9-split-credential-" + "4" * 12
    register(key)
    stream = RedactingStream(sys.stdout)
    stream.write("error: " + key[:10])
    stream.write(key[10:] + " refused\nnext ")
    stream.write(key)
    stream.flush()
    out = capsys.readouterr().out
    assert out == "error: [redacted] refused\nnext [redacted]"
