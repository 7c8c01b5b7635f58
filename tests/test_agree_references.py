"""Housekeeping (issue 27 item 9): what the code's docstrings and comments point to exists.

Every Markdown file a Python file of the repository names resolves inside the repository; no
file names a path outside it (a notes file beside the checkout, a venv of one machine); and no
test docstring says it fails on "the current tree" (a test says what is true now).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("src", "pytest_fxtr", "tests", "evals", "benchmarks")
MARKDOWN = re.compile(r"(?<![\w/.\"'-])((?:[\w-]+/)*[\w-]+\.md)\b")
"""A Markdown file named in prose (a quoted one is a file a test writes, not a reference)."""
_WORKPLACE = "/".join(("", "work", ""))  # spelt in parts: this file does not name it
OUTSIDE = re.compile(re.escape(_WORKPLACE) + r"|/home/\w|/Users/\w|~/\w|venvs/")
STALE = re.compile(r"current tree|fails? today|fails? on main", re.IGNORECASE)


def sources() -> list[Path]:
    files = [ROOT / "conftest.py"]
    for folder in FOLDERS:
        files += [p for p in (ROOT / folder).rglob("*.py") if ".venv" not in p.parts]
    return [p for p in files if p != Path(__file__).resolve()]


def test_markdown_files_named_in_the_code_exist():
    missing = []
    for path in sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in MARKDOWN.findall(line):
                if not (ROOT / name).exists() and not list(ROOT.glob(f"**/{name}")):
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {name}")
    assert missing == []


def test_no_path_outside_the_repository_and_no_stale_test_docstring():
    found = []
    for path in sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line) or (path.parts[-2:][0] != "src" and STALE.search(line)):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
