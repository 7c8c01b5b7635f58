"""The documentation runs as written: every page's Python blocks, the CI workflow's options,
the README's two commands in ``.ci/run``, and the generated pages' sources."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_blocks import NO_RUN, blocks

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
_CREDENTIALS = re.compile(r"(_API_KEY|_TOKEN|_SECRET)$|^OTEL_")


def _hook():
    spec = importlib.util.spec_from_file_location("fxtr_docs_hook", DOCS / "hooks" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scratch(tmp_path: Path) -> Path:
    """A scratch root with the repository's folders linked: paths as from the root, and a
    store of its own (a block that runs a job writes ``.fxtr`` here, not in the repository)."""
    for name in ("evals", "benchmarks", "tests", "src", "pytest_fxtr", "docs"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: p.name)
def test_every_python_block_of_the_page_runs_offline(page, tmp_path):
    if not any(b.run for b in blocks(page)):
        pytest.skip(f"{page.name} has no Python block to run")
    env = {k: v for k, v in os.environ.items() if not _CREDENTIALS.search(k)}  # offline
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src")])
    done = subprocess.run(
        [sys.executable, "-m", "tests.docs_blocks", str(page)],
        cwd=_scratch(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{page.name}: a block failed\n{done.stdout}\n{done.stderr}"
    assert int(done.stdout.split()[-1]) == sum(b.run for b in blocks(page))


def test_the_block_reader_finds_blocks_and_the_no_run_marker(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        f"# t\n\n```python\nx = 1\n```\n\n{NO_RUN}\n```python\nraise SystemExit(3)\n```\n"
        "\n```bash\nexit 1\n```\n\n```python\nassert x == 1\n```\n"
    )
    found = blocks(page)
    assert [(b.line, b.run) for b in found] == [(3, True), (8, False), (16, True)]
    assert found[0].code == "x = 1\n"
    from tests.docs_blocks import run_page

    assert run_page(page) == 2


def test_the_no_run_marker_is_documented():
    assert NO_RUN in (DOCS / "contributing.md").read_text()


def _workflow() -> dict:
    import yaml

    text = (DOCS / "ci.md").read_text()
    (workflow,) = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return yaml.safe_load(workflow)


def test_the_ci_workflow_names_only_options_the_plugin_has():
    workflow = _workflow()
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    runs = "\n".join(s.get("run", "") for s in steps)
    named = set(re.findall(r"--fxtr-[a-z-]+", runs))
    known = {row["option"] for row in _hook().pytest_options()}
    assert named and named <= known, named - known
    assert {"--fxtr-report", "--fxtr-baseline"} <= named
    assert re.search(r"pytest evals/", runs)
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)  # main's report kept
    assert any("download-artifact" in u for u in uses) or "gh run download" in runs
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers and "push" in triggers


def test_the_readme_is_short_and_its_two_commands_are_what_ci_runs():
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= 250
    commands = [line for line in readme if line.startswith("python3 -m venv .venv && ")]
    assert len(commands) == 2
    assert commands[0].endswith(".venv/bin/pytest evals/")
    assert commands[1].endswith(".venv/bin/pytest tests")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in commands:
        assert command in ci


def test_the_generated_references_come_from_the_parsers():
    hook = _hook()
    options = {row["option"] for row in hook.pytest_options()}
    assert {"--fxtr-otel", "--fxtr-report", "--fxtr-baseline"} <= options
    table = hook.pytest_options_table()
    assert all(f"`{o}" in table for o in options)
    cli = hook.cli_reference()
    for command in ("jobs", "show", "resume", "cache", "export", "compare", "view"):
        assert f"`fxtr {command}`" in cli
    page = hook.expand("<!-- fxtr: cli-reference -->\n\n<!-- fxtr: api fxtr.stats -->\n")
    assert "usage: fxtr" in page and "::: fxtr.stats" in page
    assert "not part of this version" in hook.api("fxtr.no_such_module")
