"""The docs' Python blocks: found in a page, and run in order in one namespace.

``python -m tests.docs_blocks PAGE`` runs every ```python block of PAGE (top-level ``await``
allowed), except a block preceded by the line ``<!-- fxtr: no-run -->``. Used by
``tests/test_docs.py`` in a fresh process per page.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import sys
import types
from pathlib import Path

NO_RUN = "<!-- fxtr: no-run -->"


@dataclasses.dataclass
class Block:
    """One fenced Python block of a page."""

    page: str
    line: int
    """The line of its opening fence (1-based)."""
    code: str
    run: bool


def blocks(path: Path) -> list[Block]:
    """The page's ```python blocks in order, with whether each is to be run."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            before = next((x.strip() for x in reversed(lines[:start]) if x.strip()), "")
            out.append(Block(str(path), start + 1, "\n".join(body) + "\n", before != NO_RUN))
        i += 1
    return out


def run_page(path: Path) -> int:
    """Run the page's blocks; the number run."""
    module = types.ModuleType("docs_" + path.stem.replace("-", "_"))
    sys.modules[module.__name__] = module  # a real module: dataclasses and pickling find it
    namespace = module.__dict__
    count = 0
    for block in blocks(path):
        if not block.run:
            continue
        code = compile(
            block.code, f"{block.page}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            asyncio.run(result)
        count += 1
    return count


if __name__ == "__main__":
    print(run_page(Path(sys.argv[1])))
