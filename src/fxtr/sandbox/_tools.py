"""The standard sandbox tools: ``bash``, ``python`` and ``text_editor``.

Each call runs a new process in the trajectory's sandbox, in ``workdir``, on the tree as the
previous call left it. Only files persist between calls: a background process, a shell
variable or a ``cd`` does not (as inspect_ai's ``bash``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from fxtr.agents import tool
from fxtr.sandbox._session import SandboxSession

EDITOR = (Path(__file__).parent / "_editor.py").read_text()


class CommandFailedError(Exception):
    """The command exited non-zero, timed out or was stopped: the model reads why."""


def _reply(sandbox: SandboxSession, text: str) -> str:
    if sandbox.failed:
        raise CommandFailedError(text)
    return text


@tool
async def bash(cmd: str, sandbox: SandboxSession) -> str:
    """Run a bash command in the sandbox and return its output (stdout, then stderr).

    Each call is a new shell in the working directory: files persist between calls, but a
    `cd`, a variable or a background process does not.

    Args:
        cmd: the bash command to run.
        sandbox: the trajectory's sandbox (given by fxtr, not shown to the model).
    """
    out = await sandbox.exec(["bash", "--noprofile", "--norc", "-c", cmd])
    return _reply(sandbox, sandbox.text(out))


@tool
async def python(code: str, sandbox: SandboxSession) -> str:
    """Run Python code in the sandbox (python3) and return what it prints.

    Each call is a new interpreter in the working directory: print what you want to see;
    files persist between calls, variables do not.

    Args:
        code: the Python program to run.
        sandbox: the trajectory's sandbox (given by fxtr, not shown to the model).
    """
    out = await sandbox.exec(["python3", "-"], stdin=code.encode())
    return _reply(sandbox, sandbox.text(out))


@tool
async def text_editor(
    command: Literal["view", "create", "str_replace", "insert"],
    path: str,
    sandbox: SandboxSession,
    file_text: str | None = None,
    view_range: list[int] | None = None,
    old_str: str | None = None,
    new_str: str | None = None,
    insert_line: int | None = None,
) -> str:
    """View, create and edit files in the sandbox.

    `view` shows a file with line numbers (`cat -n`), or a directory two levels deep;
    `view_range` [first, last] shows lines first to last (last -1: to the end). `create`
    writes a new file (never over an existing one). `str_replace` replaces `old_str`, which
    must appear exactly once in the file, with `new_str`. `insert` adds `new_str` after line
    `insert_line` (0: at the top).

    Args:
        command: view, create, str_replace or insert.
        path: the file or directory (absolute, or relative to the working directory).
        file_text: the content of the file to create.
        view_range: the lines to view, [first, last].
        old_str: the text to replace (exactly once in the file).
        new_str: the replacement (str_replace) or the text to insert (insert).
        insert_line: the line after which to insert (0 for the top).
        sandbox: the trajectory's sandbox (given by fxtr, not shown to the model).
    """
    arguments = {
        "command": command,
        "path": path,
        "file_text": file_text,
        "view_range": view_range,
        "old_str": old_str,
        "new_str": new_str,
        "insert_line": insert_line,
        "workdir": sandbox.settings.workdir,
    }
    out = await sandbox.exec(["python3", "-c", EDITOR], stdin=json.dumps(arguments).encode())
    return _reply(sandbox, sandbox.text(out, exit_line=False))
