from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fxtr import Array
from fxtr.experiment._array import align_keys
from fxtr.experiment._types import Dim, parse_dims

keys_str = st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=4, unique=True)
keys_int = st.lists(st.integers(-50, 50), min_size=1, max_size=4, unique=True)


@st.composite
def nested_mappings(draw):
    ndims = draw(st.integers(1, 3))
    names = [f"d{i}" for i in range(ndims)]
    keylists = [draw(st.one_of(keys_str, keys_int)) for _ in range(ndims)]

    def build(level, prefix):
        if level == ndims:
            return draw(st.one_of(st.integers(), st.text(max_size=3), st.none()))
        return {k: build(level + 1, (*prefix, k)) for k in keylists[level]}

    return names, keylists, build(0, ())


def test_parse_dims():
    """Dimension strings parse into named, typed dimensions."""
    assert parse_dims("[model: str, prompt: str]") == (Dim("model", str), Dim("prompt", str))
    assert parse_dims("[]") == ()
    assert parse_dims(" [ sample : int ] ") == (Dim("sample", int),)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("model: str", "malformed"),
        ("[model]", "'name: str' or 'name: int'"),
        ("[model: float]", "Keys must be 'str' or 'int'"),
        ("[a: str, a: int]", "appears twice"),
    ],
)
def test_parse_dims_errors(spec, fragment):
    """A malformed dimension string names itself and the fix."""
    with pytest.raises(ValueError) as info:
        parse_dims(spec)
    assert fragment in str(info.value)
    assert repr(spec) in str(info.value) or spec in str(info.value)


def test_scalar():
    """A scalar has no dims, one item, and `item()`."""
    a = Array.scalar(3, int)
    assert a.dims == ()
    assert list(a.items()) == [((), 3)]
    assert a.item() == 3
    assert a.to_dict() == 3
    assert len(a) == 1


def test_from_mapping_two_dims_and_selection():
    """Nested mappings build a dense array; selection by keys works fully and partly."""
    a = Array.from_mapping(
        {"a": {"p1": 1.0, "p2": 0.5}, "b": {"p2": 0.0, "p1": 1.0}},
        dims=["model", "prompt"],
        value_type=float,
    )
    assert a.dims == ("model", "prompt")
    assert a.keys("prompt") == ("p1", "p2")
    assert a["b", "p2"] == 0.0
    assert a.sel(model="a").to_dict() == {"p1": 1.0, "p2": 0.5}
    assert a.sel(prompt="p1").dims == ("model",)
    assert list(a.items())[1] == (("a", "p2"), 0.5)
    assert a.shape == {"model": 2, "prompt": 2}


def test_from_mapping_reads_exactly_len_dims_levels():
    """Anything nested deeper than the dims is a value."""
    a = Array.from_mapping({"x": {"inner": 1}}, dims=["k"])
    assert a["x"] == {"inner": 1}


def test_ragged_mapping_is_an_error():
    """A ragged mapping names the missing combination; nothing is dropped."""
    with pytest.raises(ValueError, match="ragged") as info:
        Array.from_mapping({"a": {"p1": 1}, "b": {"p2": 2}}, dims=["model", "prompt"])
    assert "model='a', prompt='p2'" in str(info.value)


def test_too_shallow_mapping_is_an_error():
    """A value where a mapping level is expected says which dimension."""
    with pytest.raises(ValueError, match="expected a mapping for dimension 'prompt'"):
        Array.from_mapping({"a": 1}, dims=["model", "prompt"])


def test_value_type_is_checked():
    """A value of the wrong type names the cell and the fix."""
    with pytest.raises(TypeError, match=r"at \('b',\).*not float"):
        Array.from_mapping({"a": 1.0, "b": "x"}, dims=["k"], value_type=float)


def test_mixed_key_types_are_an_error():
    """Keys of one dimension are all str or all int."""
    with pytest.raises(ValueError, match="all be str or all be int"):
        Array.from_mapping({"a": 1, 2: 3}, dims=["k"])


def test_typed_dims_check_keys():
    """Declared key types are enforced."""
    with pytest.raises(TypeError, match="Key 'a' of dimension 'k' is str"):
        Array.from_mapping({"a": 1}, dims="[k: int]")


def test_selection_errors_name_the_keys():
    """Unknown dims and keys are KeyErrors listing what exists."""
    a = Array.from_mapping({"a": 1}, dims=["k"])
    with pytest.raises(KeyError, match="dimensions are"):
        a.keys("nope")
    with pytest.raises(KeyError, match="its keys are"):
        a.sel(k="zz")
    with pytest.raises(ValueError, match="needs a scalar"):
        a.item()


def test_equality_and_transpose():
    """Equal arrays compare equal; transposing changes dims order but not the cells."""
    a = Array.from_mapping({"a": {1: "x", 2: "y"}}, dims=["m", "n"])
    b = Array.from_mapping({"a": {1: "x", 2: "y"}}, dims=["m", "n"])
    assert a == b
    t = a.transpose(["n", "m"])
    assert t.dims == ("n", "m")
    assert t[2, "a"] == "y"
    assert t != a


@given(nested_mappings())
def test_from_mapping_to_dict_round_trips(case):
    """`to_dict` gives back the mapping `from_mapping` was built from."""
    names, keylists, mapping = case
    a = Array.from_mapping(mapping, dims=names)
    assert a.to_dict() == mapping
    assert len(a) == len(list(itertools.product(*keylists)))
    assert [k for k, _ in a.items()] == list(itertools.product(*keylists))
    for i, name in enumerate(names):
        assert list(a.keys(name)) == keylists[i]


@given(nested_mappings(), st.data())
def test_sel_agrees_with_indexing(case, data):
    """Selecting some dims then indexing the rest equals indexing all at once."""
    names, keylists, mapping = case
    a = Array.from_mapping(mapping, dims=names)
    chosen = {n: data.draw(st.sampled_from(k)) for n, k in zip(names, keylists, strict=True)}
    split = data.draw(st.integers(0, len(names)))
    sub = a.sel(**{n: chosen[n] for n in names[:split]})
    rest = tuple(chosen[n] for n in names[split:])
    expected = a[tuple(chosen[n] for n in names)]
    assert (sub[rest] if rest else sub.item()) == expected


def test_align_keys_errors():
    """Disagreeing key sets and unknown mapped dims are clear errors."""
    x = (Dim("m", str),)
    with pytest.raises(ValueError, match="disagree on the keys of dimension 'm'") as info:
        align_keys({"a": (x, (("a", "b"),)), "b": (x, (("a", "c"),))}, ["m"])
    assert "only in 'a': ['b']" in str(info.value)
    with pytest.raises(ValueError, match="no input has it"):
        align_keys({"a": (x, (("a",),))}, ["zz"])


@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True), st.randoms())
def test_align_keys_accepts_any_order(keys, rnd):
    """The same key set in another order aligns, in the first input's order."""
    other = list(keys)
    rnd.shuffle(other)
    x = (Dim("m", str),)
    assert align_keys({"a": (x, (tuple(keys),)), "b": (x, (tuple(other),))}, ["m"]) == [tuple(keys)]
