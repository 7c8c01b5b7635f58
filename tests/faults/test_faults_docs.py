"""docs/faults.md: every Python block on the page runs as written (offline)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.faults.conftest import PYTHON, ROOT, env

PAGE = ROOT / "docs" / "faults.md"
BLOCK = re.compile(r"(<!-- fxtr: no-run -->\n)?```python\n(.*?)```", re.S)


def test_the_python_blocks_of_the_faults_page_run(tmp_path: Path) -> None:
    blocks = [code for skip, code in BLOCK.findall(PAGE.read_text()) if not skip]
    assert blocks
    for code in blocks:
        proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, env=env(), timeout=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Zq8v3" not in proc.stdout and proc.stdout.count("[redacted]") == 2, proc.stdout
