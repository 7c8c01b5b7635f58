"""The sandbox tools (bash, python, text_editor with Anthropic's semantics) and layers."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from fxtr.agents import ToolCall
from fxtr.sandbox import Files, Sandbox, bash, python, text_editor
from fxtr.sandbox._files import parse, tree_digest
from fxtr.sandbox._steps import build, manifest_of, run_call

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

TEXT = "one\ntwo\nthree\nfour\n"


class Box:
    """A sandbox tree driven call by call, as a trajectory does."""

    def __init__(self, files: dict | None = None, **settings) -> None:
        self.box = Sandbox(files=Files(files or {"f.txt": TEXT}), **settings)
        self.tree = asyncio.run(build(None, self.box.files, self.box)).tree
        self.start = self.tree

    def __call__(self, tool, **arguments):
        out = asyncio.run(
            run_call(
                None,
                tool,
                ToolCall(id="c", name=tool.name, arguments=arguments),
                self.box.settings(),
                self.tree,
            )
        )
        assert out.layer.before == self.tree
        self.tree = out.tree
        return out


def test_view_a_file_with_line_numbers_and_a_range():
    """view prints `cat -n`; view_range [2, 3] and [3, -1] show those lines."""
    box = Box()
    whole = box(text_editor, command="view", path="/workspace/f.txt").result.content
    assert whole.startswith("Here's the result of running `cat -n` on /workspace/f.txt:")
    assert "     1\tone\n     2\ttwo" in whole
    part = box(text_editor, command="view", path="f.txt", view_range=[2, 3]).result.content
    assert "     2\ttwo\n     3\tthree" in part and "one" not in part and "four" not in part
    tail = box(text_editor, command="view", path="f.txt", view_range=[3, -1]).result.content
    assert "     3\tthree" in tail and "two" not in tail
    bad = box(text_editor, command="view", path="f.txt", view_range=[9, 10]).result
    assert bad.is_error and "Invalid `view_range`" in bad.content


def test_view_a_directory_two_levels_deep_without_hidden_items():
    """A directory lists its files two levels deep, hidden ones left out."""
    box = Box({"a/b/c/deep.txt": "x", "a/one.txt": "1", ".hidden": "h"})
    out = box(text_editor, command="view", path="/workspace").result.content
    assert "/workspace/a/one.txt" in out and "/workspace/a/b\n" in out + "\n"
    assert "/workspace/a/b/c" not in out
    assert "deep.txt" not in out and ".hidden" not in out


def test_create_refuses_an_existing_file_and_makes_a_new_one():
    """create never overwrites; a new file appears in the layer."""
    box = Box()
    refused = box(text_editor, command="create", path="f.txt", file_text="x")
    assert refused.result.is_error and "Cannot overwrite files using command `create`" in (
        refused.result.content
    )
    assert refused.layer.empty
    made = box(text_editor, command="create", path="src/new.py", file_text="print(1)\n")
    assert not made.result.is_error
    assert set(made.layer.added) == {"src", "src/new.py"}


def test_str_replace_must_match_exactly_once():
    """Zero matches and several matches are refused; one match is replaced."""
    box = Box({"f.txt": "a = 1\nb = 1\n"})
    none = box(text_editor, command="str_replace", path="f.txt", old_str="c = 1", new_str="x")
    assert none.result.is_error and "did not appear verbatim" in none.result.content
    many = box(text_editor, command="str_replace", path="f.txt", old_str="= 1", new_str="= 2")
    assert many.result.is_error and "Multiple occurrences" in many.result.content
    assert "[1, 2]" in many.result.content and many.layer.empty
    one = box(text_editor, command="str_replace", path="f.txt", old_str="b = 1", new_str="b = 2")
    assert not one.result.is_error and "has been edited" in one.result.content
    assert list(one.layer.changed) == ["f.txt"]
    view = box(bash, cmd="cat f.txt").result.content
    assert view == "a = 1\nb = 2"


def test_insert_after_a_line_and_at_the_top():
    """insert_line n puts the text after line n; 0 at the top; past the end is refused."""
    box = Box()
    box(text_editor, command="insert", path="f.txt", insert_line=2, new_str="2.5")
    box(text_editor, command="insert", path="f.txt", insert_line=0, new_str="zero")
    bad = box(text_editor, command="insert", path="f.txt", insert_line=99, new_str="x")
    assert bad.result.is_error and "Invalid `insert_line`" in bad.result.content
    text = box(bash, cmd="cat f.txt").result.content
    assert text.split("\n") == ["zero", "one", "two", "2.5", "three", "four"]


def test_only_files_persist_between_calls():
    """A cd, a variable and a background process do not outlive their call; files do."""
    box = Box()
    box(bash, cmd="mkdir sub; cd sub; export X=1; echo kept > file; (sleep 60 &)")
    out = box(bash, cmd="pwd; echo X=$X; cat sub/file; ps -e -o comm | grep -c sleep || true")
    assert out.result.content.split("\n") == ["/workspace", "X=", "kept", "0"]


def test_python_tool_runs_code_and_reports_errors():
    """python runs the code with python3; an exception is an error result."""
    box = Box()
    assert box(python, code="print(6 * 7)").result.content == "42"
    failed = box(python, code="raise SystemExit('boom')").result
    assert failed.is_error and "boom" in failed.content and "[exit code 1]" in failed.content


def test_a_layer_records_added_changed_mode_and_deleted_files():
    """Content and mode changes, additions (directories too) and deletions, by digest."""
    box = Box({"keep.txt": "k", "gone.txt": "g", "run.sh": "echo hi\n", "edit.txt": "1"})
    out = box(
        bash, cmd="rm gone.txt; chmod +x run.sh; echo 2 > edit.txt; mkdir d; ln -s keep.txt d/l"
    )
    layer = out.layer
    assert layer.deleted == ("gone.txt",)
    assert set(layer.changed) == {"run.sh", "edit.txt"}
    assert parse(layer.changed["run.sh"])[0] & 0o111
    assert set(layer.added) == {"d", "d/l"}
    manifest = asyncio.run(manifest_of(None, out.tree))
    assert tree_digest(manifest) == out.tree
    assert (
        "gone.txt" not in manifest
        and manifest["keep.txt"] == Files({"keep.txt": "k"}).manifest["keep.txt"]
    )


def test_a_call_reruns_on_a_fresh_workspace_to_the_same_tree():
    """The same call on the same tree gives the same tree digest (materialized anew)."""
    from fxtr.sandbox import POOL

    first = Box()
    a = first(bash, cmd="echo new > n.txt; chmod 600 f.txt")
    POOL.clear()
    second = Box()
    materialized = POOL.materialized
    b = second(bash, cmd="echo new > n.txt; chmod 600 f.txt")
    assert POOL.materialized == materialized + 1
    assert a.tree == b.tree and a.layer == b.layer
