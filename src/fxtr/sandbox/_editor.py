# ruff: noqa: EM101, EM102, E501  (a standalone script: its messages are the model's reading)
# mypy: ignore-errors
"""The text editor, run inside the sandbox (``python3 -c``, its arguments as JSON on stdin).

It behaves as Anthropic's text editor tool: ``view`` (a file with ``cat -n`` numbers and an
optional ``view_range``, or a directory two levels deep), ``create`` (a new file; never over an
existing one), ``str_replace`` (``old_str`` must appear exactly once) and ``insert`` (after
line ``insert_line``, 0 for the top). It prints what the model reads and exits 1 on an error.
This file is standalone: only the standard library, nothing of fxtr.
"""

import json
import os
import sys

SNIPPET_LINES = 4


def numbered(text, start=1):
    return "\n".join(f"{i + start:6}\t{line}" for i, line in enumerate(text.split("\n")))


def snippet(text, line):
    lines = text.split("\n")
    first = max(0, line - SNIPPET_LINES)
    last = min(len(lines), line + SNIPPET_LINES + 1)
    return numbered("\n".join(lines[first:last]), first + 1)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def view(path, view_range):
    if os.path.isdir(path):
        if view_range:
            raise ValueError(
                "The `view_range` parameter is not allowed when `path` points to a directory."
            )
        found = []
        for root, dirs, files in os.walk(path):
            depth = root[len(path) :].count(os.sep)
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            if depth >= 2:
                dirs[:] = []
            for name in dirs + sorted(f for f in files if not f.startswith(".")):
                found.append(os.path.join(root, name))
        listing = "\n".join([path, *sorted(found)])
        return f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden items:\n{listing}\n"
    text = read(path)
    start = 1
    if view_range:
        if len(view_range) != 2 or not all(isinstance(i, int) for i in view_range):
            raise ValueError("Invalid `view_range`. It should be a list of two integers.")
        lines = text.split("\n")
        first, last = view_range
        if first < 1 or first > len(lines):
            raise ValueError(
                f"Invalid `view_range`: {view_range}. Its first element `{first}` should be "
                f"within the range of lines of the file: {[1, len(lines)]}"
            )
        if last != -1 and last > len(lines):
            raise ValueError(
                f"Invalid `view_range`: {view_range}. Its second element `{last}` should be "
                f"smaller than the number of lines in the file: `{len(lines)}`"
            )
        if last != -1 and last < first:
            raise ValueError(
                f"Invalid `view_range`: {view_range}. Its second element `{last}` should be "
                f"larger or equal than its first `{first}`"
            )
        text = "\n".join(lines[first - 1 :] if last == -1 else lines[first - 1 : last])
        start = first
    return f"Here's the result of running `cat -n` on {path}:\n{numbered(text, start)}\n"


def create(path, file_text):
    if file_text is None:
        raise ValueError("Parameter `file_text` is required for command: create")
    if os.path.exists(path):
        raise ValueError(
            f"File already exists at: {path}. Cannot overwrite files using command `create`."
        )
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    write(path, file_text)
    return f"File created successfully at: {path}"


def str_replace(path, old_str, new_str):
    if old_str is None:
        raise ValueError("Parameter `old_str` is required for command: str_replace")
    text = read(path).expandtabs()
    old_str = old_str.expandtabs()
    new_str = (new_str or "").expandtabs()
    count = text.count(old_str) if old_str else 0
    if count == 0:
        raise ValueError(
            f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}."
        )
    if count > 1:
        lines = [i + 1 for i, line in enumerate(text.split("\n")) if old_str in line]
        raise ValueError(
            f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines "
            f"{lines}. Please ensure it is unique"
        )
    edited = text.replace(old_str, new_str)
    write(path, edited)
    line = text.split(old_str)[0].count("\n")
    return (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet "
        f"of {path}:\n{snippet(edited, line + new_str.count(chr(10)) // 2)}\n"
        "Review the changes and make sure they are as expected. Edit the file again if necessary."
    )


def insert(path, insert_line, new_str):
    if insert_line is None:
        raise ValueError("Parameter `insert_line` is required for command: insert")
    if new_str is None:
        raise ValueError("Parameter `new_str` is required for command: insert")
    text = read(path).expandtabs()
    lines = text.split("\n")
    if not isinstance(insert_line, int) or insert_line < 0 or insert_line > len(lines):
        raise ValueError(
            f"Invalid `insert_line` parameter: {insert_line}. It should be within the range of "
            f"lines of the file: {[0, len(lines)]}"
        )
    added = new_str.expandtabs().split("\n")
    edited = "\n".join(lines[:insert_line] + added + lines[insert_line:])
    write(path, edited)
    return (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet "
        f"of the edited file:\n{snippet(edited, insert_line + len(added) // 2)}\n"
        "Review the changes and make sure they are as expected (correct indentation, no "
        "duplicate lines, etc). Edit the file again if necessary."
    )


def main():
    args = json.loads(sys.stdin.read())
    command, path = args.get("command"), args.get("path") or ""
    workdir = args.get("workdir") or ""
    if workdir and os.getcwd() != workdir and (path + "/").startswith(workdir + "/"):
        path = os.getcwd() + path[len(workdir) :]  # the local backend: the tree is elsewhere
    path = os.path.normpath(os.path.join(os.getcwd(), path))
    if command != "create" and not os.path.exists(path):
        raise ValueError(f"The path {path} does not exist. Please provide a valid path.")
    if command != "view" and os.path.isdir(path):
        raise ValueError(
            f"The path {path} is a directory and only the `view` command can be used on directories"
        )
    if command == "view":
        return view(path, args.get("view_range"))
    if command == "create":
        return create(path, args.get("file_text"))
    if command == "str_replace":
        return str_replace(path, args.get("old_str"), args.get("new_str"))
    if command == "insert":
        return insert(path, args.get("insert_line"), args.get("new_str"))
    raise ValueError(
        f"Unrecognized command {command}. The allowed commands for the text_editor tool are: "
        "view, create, str_replace, insert"
    )


if __name__ == "__main__":
    try:
        sys.stdout.write(main())
    except (ValueError, OSError) as exc:
        sys.stdout.write(str(exc))
        sys.exit(1)
