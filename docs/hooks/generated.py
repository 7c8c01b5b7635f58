"""MkDocs hook: pages generated from the code at build time, never copied by hand.

Markers a page may hold, each on a line of its own:

- ``<!-- fxtr: cli-reference -->``: every ``fxtr`` subcommand's ``--help``, from its parser;
- ``<!-- fxtr: pytest-options -->``: the plugin's ``--fxtr-*`` options and ``fxtr_*`` ini
  twins, from the parser the plugin registers them on;
- ``<!-- fxtr: api MODULE -->``: the mkdocstrings reference of MODULE (``::: MODULE``) when it
  can be imported, else a line saying it is not in this version (``fxtr.agents`` lands on its
  own branch).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
from typing import Any

_MARKER = re.compile(r"^<!-- fxtr: (?P<what>[a-z-]+)(?: (?P<arg>[\w.]+))? -->$", re.MULTILINE)


def cli_reference() -> str:
    """Every ``fxtr`` command's help, as argparse prints it."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same page everywhere
    from fxtr.cli import _parser

    out: list[str] = []

    def walk(parser: argparse.ArgumentParser, name: str, depth: int) -> None:
        out.append(f"{'#' * depth} `{name}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}", min(depth + 1, 4))

    walk(_parser(), "fxtr", 3)
    return "\n".join(out)


def pytest_options() -> list[dict[str, Any]]:
    """The plugin's options as the parser holds them: names, metavar, help, ini twin."""
    from _pytest.config.argparsing import Parser

    from pytest_fxtr._settings import add_options

    parser = Parser(_ispytest=True)  # the parser pytest gives plugins, built as pytest builds it
    add_options(parser)
    inis = dict(parser._inidict)
    rows = []
    for option in parser.getgroup("fxtr").options:
        (name,) = option.names()
        attrs = option.attrs()
        ini = "fxtr_" + name.removeprefix("--fxtr-").replace("-", "_")
        rows.append(
            {
                "option": name,
                "metavar": attrs.get("metavar"),
                "help": attrs.get("help", ""),
                "ini": ini if ini in inis else None,
            }
        )
    return rows


def pytest_options_table() -> str:
    """The options as a Markdown table (option, ini twin, help)."""
    lines = ["| option | ini | meaning |", "|---|---|---|"]
    for row in pytest_options():
        flag = f"`{row['option']}{' ' + row['metavar'] if row['metavar'] else ''}`"
        ini = f"`{row['ini']}`" if row["ini"] else ""
        text = row["help"].replace("|", "&#124;").replace("<", "&lt;")
        lines.append(f"| {flag} | {ini} | {text} |")
    return "\n".join(lines) + "\n"


def api(module: str) -> str:
    """The mkdocstrings directive for ``module``, or a note when it is not installed."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if found:
        return f"::: {module}\n"
    return f"`{module}` is not part of this version of fxtr.\n"


def expand(markdown: str) -> str:
    """The page with every marker replaced by what it stands for."""

    def one(match: re.Match[str]) -> str:
        what, arg = match["what"], match["arg"]
        if what == "cli-reference":
            return cli_reference()
        if what == "pytest-options":
            return pytest_options_table()
        if what == "api" and arg:
            return api(arg)
        return match[0]  # another marker (no-run): left for the docs test

    return _MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: expand the markers of each page."""
    return expand(markdown)
