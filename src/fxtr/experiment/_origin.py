"""Where a job was launched from, so a later process can import what the job names.

A job's record names its root workflow, its tools, mocks and environment functions by import
path (``module:qualname``). Two launchers make paths that another process cannot import by
name alone:

- ``python job.py``: the script is ``__main__``, so a workflow defined in it is recorded as
  ``__main__:evaluate``. The record keeps the script's path (``origin.script``); resuming loads
  it as a module by path, its folder on ``sys.path``, under the name ``__mp_main__`` (as
  :mod:`multiprocessing` loads the parent's script in a spawned child), so its
  ``if __name__ == "__main__":`` block does not run, and ``__main__:NAME`` paths resolve in it.
- pytest: an eval module is imported the way pytest's ``rootdir``, ``conftest.py`` files and
  import mode decide. The plugin records ``origin`` with ``kind="pytest"``; the ``fxtr``
  command repeats pytest's collection of that file before resuming (see ``fxtr.cli``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from types import ModuleType
from typing import Any

SCRIPT_MODULE = "__mp_main__"
"""The name a launching script is loaded under when a job is resumed in another process."""


def _same_file(a: str | None, b: str) -> bool:
    if not a:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _installed(path: str) -> bool:
    """Whether ``path`` is inside the interpreter's installation (pytest's ``__main__``)."""
    real = os.path.realpath(path)
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "scripts")}
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots)


def script_origin() -> dict[str, Any] | None:
    """``{"kind": "script", "script": PATH}`` for a process started as ``python job.py``.

    ``None`` for an interactive session or a ``__main__`` that is an installed program
    (``pytest``, ``python -m pytest``): there is no script of the user's to load again.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not str(path).endswith(".py") or not os.path.isfile(path):
        return None
    if _installed(path):
        return None
    return {"kind": "script", "script": os.path.abspath(path)}


def load_script(path: str) -> ModuleType:
    """The launching script at ``path`` as a module, its ``__main__`` block not run.

    The running ``__main__`` itself when it is that script (a launcher resuming its own
    job); else the script loaded once under ``__mp_main__``, its folder first on
    ``sys.path`` (as ``python job.py`` had it).

    Raises:
        ImportError: the script is gone or cannot be loaded (its own error, named).
    """
    main = sys.modules.get("__main__")
    if _same_file(getattr(main, "__file__", None), path):
        assert main is not None
        return main
    loaded = sys.modules.get(SCRIPT_MODULE)
    if loaded is not None and _same_file(getattr(loaded, "__file__", None), path):
        return loaded
    if not os.path.isfile(path):
        msg = f"the script {path} that launched the job is gone"
        raise ImportError(msg)
    if not _guarded(path):
        msg = (
            f"the script {path} has no `if __name__ == \"__main__\":` block, so loading it "
            "would run its launch again. Put the launch under that block"
        )
        raise ImportError(msg)
    return load_file(SCRIPT_MODULE, path)


def _guarded(path: str) -> bool:
    """Whether the script has a top-level ``if __name__ == "__main__":`` block."""
    import ast

    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return True  # loading it reports the problem in its own words
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Compare) and len(test.comparators) == 1:
            sides = {ast.unparse(test.left), ast.unparse(test.comparators[0])}
            if sides in ({"__name__", "'__main__'"}, {"__name__", '"__main__"'}):
                return True
    return False


def load_file(name: str, path: str) -> ModuleType:
    """The module file at ``path`` imported as ``name``, its folder first on ``sys.path``.

    Raises:
        ImportError: it cannot be loaded.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        msg = f"cannot load {path}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def main_module() -> ModuleType | None:
    """The module ``__main__:NAME`` paths resolve in: the loaded script, else ``__main__``."""
    return sys.modules.get(SCRIPT_MODULE) or sys.modules.get("__main__")


def _names_main(record: dict[str, Any]) -> bool:
    """Whether the job may name something only its launching script makes.

    The root workflow or a tool, environment or scorer among its inputs at ``__main__:NAME``
    (the inputs' canonical text holds their import paths), or a ``mock/NAME`` model, which
    exists in a process once the script (or a module it imports) registers it.
    """
    if str(record.get("workflow_path", "")).startswith("__main__:"):
        return True
    inputs = record.get("inputs") or {}
    return any("__main__:" in str(text) or '"mock/' in str(text) for text in inputs.values())


def load_origin(record: dict[str, Any]) -> None:
    """Load the script a job was launched from, when the job names something in it.

    Raises:
        LookupError: the script is gone or fails to load, naming it and the fix.
    """
    origin = record.get("origin") or {}
    if origin.get("kind") != "script" or not origin.get("script"):
        return
    if not _names_main(record):
        return  # everything the job names imports by its module's name
    try:
        load_script(str(origin["script"]))
    except Exception as exc:
        msg = (
            f"job {record.get('job_id')} was launched by the script {origin['script']}, which "
            f"cannot be loaded again ({type(exc).__name__}: {exc}). Restore it, or resume from "
            "Python with resume(job_id, workflow=...) in a process that imports its code."
        )
        raise LookupError(msg) from None
