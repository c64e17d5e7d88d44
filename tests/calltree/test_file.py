"""The saved profile file: round trips, hostile input, versions, atomic writes, combine."""

from __future__ import annotations

import contextlib
import copy
import gzip
import json
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profkit.calltree import file
from profkit.calltree.model import CallProfile
from profkit.errors import ProfileDataError
from tests.calltree.strategies import deep_profile, profiles, sample_profile


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles())
def test_round_trip_property(profile: CallProfile) -> None:
    doc = json.loads(json.dumps(file.to_json(profile)))
    assert file.from_json(doc) == profile


@pytest.mark.parametrize("name", ["p.json", "p.json.gz", "p.pkprof"])
def test_save_load_round_trip(tmp_path: Path, name: str) -> None:
    prof = sample_profile()
    path = tmp_path / name
    file.save(prof, path)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    loaded = file.load(path)
    assert loaded == prof
    assert [list(t.root.children) for t in loaded.threads] == [
        list(t.root.children) for t in prof.threads
    ]


def test_deep_tree_round_trip_without_recursion(tmp_path: Path) -> None:
    prof = deep_profile(5000)
    file.save(prof, tmp_path / "deep.json")
    assert file.load(tmp_path / "deep.json") == prof


def test_save_is_atomic_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("old")
    file.save(sample_profile(), path)
    assert sorted(os.listdir(tmp_path)) == ["p.json"]


def test_unserialisable_metadata_is_stored_as_repr(tmp_path: Path) -> None:
    prof = sample_profile()
    prof.metadata["odd"] = object()
    file.save(prof, tmp_path / "p.json")
    assert file.load(tmp_path / "p.json").metadata["odd"].startswith("<object")


def _bytes(prof: CallProfile | None = None) -> bytes:
    return json.dumps(file.to_json(prof or sample_profile())).encode()


def _expect(raw: bytes, kind: str | None = None, where: str | None = None) -> ProfileDataError:
    with pytest.raises(ProfileDataError) as info:
        file.loads(raw, path="x.json")
    assert "x.json" in str(info.value)
    if kind is not None:
        assert info.value.kind == kind, str(info.value)
    if where is not None:
        assert where in str(info.value), str(info.value)
    return info.value


def test_newer_version_is_refused_clearly() -> None:
    doc = file.to_json(sample_profile())
    doc["version"] = 99
    err = _expect(json.dumps(doc).encode(), "unsupported_version")
    assert "upgrade profkit" in str(err)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"", "truncated"),
        (b"[1, 2]", "bad_magic"),
        (b'{"nodes": []}', "bad_magic"),
        (b"\xff\xfe", "malformed"),
        (b"\x1f\x8b\x08garbage", "malformed"),
        (
            b'{"format": "profkit.calltree", "version": 1, "mode": "trace", "frames": [], '
            b'"threads": [], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            None,
        ),
        (
            b'{"format": "profkit.calltree", "version": 1, "mode": "trace", "frames": [], '
            b'"threads": [], "metadata": {"a": ' + b"[" * 100 + b"]" * 100 + b"}}",
            "too_large",
        ),
        (
            b'{"format": "profkit.calltree", "version": 1, "mode": "x", "frames": [], "threads": []}',
            "malformed",
        ),
        (
            b'{"format": "profkit.calltree", "version": 1, "mode": "trace", "frames": [], '
            b'"threads": [], "n": 1' + b"0" * 5000 + b"}",
            "malformed",
        ),
    ],
)
def test_hostile_documents(raw: bytes, kind: str | None) -> None:
    # the deeply nested "x" is either accepted (unknown keys are ignored) or refused cleanly
    try:
        file.loads(raw, path="x.json")
    except ProfileDataError as exc:
        if kind is not None:
            assert exc.kind == kind, str(exc)
    else:
        assert kind is None


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d["threads"][0]["nodes"][1].__setitem__(2, -1), "/threads/0/nodes/1/2"),
        (lambda d: d["threads"][0]["nodes"][1].__setitem__(3, 1.5), "/threads/0/nodes/1/3"),
        (lambda d: d["threads"][0]["nodes"][1].__setitem__(3, True), "/threads/0/nodes/1/3"),
        (lambda d: d["threads"][0]["nodes"][2].__setitem__(0, 7), "/threads/0/nodes/2/0"),
        (lambda d: d["threads"][0]["nodes"][2].__setitem__(1, 99), "/threads/0/nodes/2/1"),
        (lambda d: d["threads"][0]["nodes"][0].__setitem__(1, 0), "/threads/0/nodes/0"),
        (lambda d: d["threads"][0]["nodes"].append([0, 0, 1, 1, 1, 1, 1]), "appears twice"),
        (lambda d: d["threads"][0].pop("name"), "missing key 'name'"),
        (lambda d: d["threads"][0].__setitem__("nodes", []), "/threads/0/nodes"),
        (lambda d: d["frames"].__setitem__(0, ["a", "b"]), "/frames/0"),
        (lambda d: d["frames"].__setitem__(0, [1, "b", 2]), "/frames/0/0"),
        (lambda d: d["spans"][0].__setitem__(3, -1), "/spans/0/3"),
        (lambda d: d["spans"][0].__setitem__(0, 5), "/spans/0/0"),
        (lambda d: d.__setitem__("metadata", []), "/metadata"),
        (lambda d: d.__setitem__("threads", {}), "/threads"),
        (lambda d: d.pop("frames"), "missing key 'frames'"),
        (lambda d: d.__setitem__("version", "1"), "/version"),
    ],
)
def test_mutations_name_the_location(mutate: object, where: str) -> None:
    doc = file.to_json(sample_profile())
    doc = json.loads(json.dumps(doc))
    assert callable(mutate)
    mutate(doc)
    _expect(json.dumps(doc).encode(), where=where)


def test_every_truncation_of_a_small_file_is_a_clean_error() -> None:
    raw = _bytes()
    for cut in range(len(raw)):
        with pytest.raises(ProfileDataError):
            file.loads(raw[:cut], path="x.json")


def test_a_file_cut_inside_a_string_is_truncated_and_said_once() -> None:
    raw = _bytes()
    cut = raw.index(b'"', raw.index(b'"frames"') + len(b'"frames"')) + 2
    with pytest.raises(ProfileDataError) as caught:
        file.loads(raw[:cut], path="x.json")
    assert caught.value.kind == "truncated"
    message = str(caught.value)
    assert "Unterminated string starting at column" in message and "at at" not in message


def test_truncated_and_mutated_gzip() -> None:
    raw = gzip.compress(_bytes(), mtime=0)
    rng = random.Random(4)
    cuts = sorted(rng.sample(range(len(raw)), 60))
    for cut in cuts:
        with pytest.raises(ProfileDataError):
            file.loads(raw[:cut], path="x.json.gz")
    for _ in range(200):
        mutated = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        with contextlib.suppress(ProfileDataError):
            file.loads(bytes(mutated), path="x.json.gz")


def test_random_byte_mutations_of_json_only_raise_profile_data_error() -> None:
    raw = _bytes()
    rng = random.Random(7)
    for _ in range(300):
        mutated = bytearray(raw)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.choice(b'0123456789-[]{}",:ae ')
        with contextlib.suppress(ProfileDataError):
            file.loads(bytes(mutated), path="x.json")


def test_gzip_bomb_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file, "MAX_BYTES", 10_000)
    bomb = gzip.compress(b" " * 1_000_000)
    assert len(bomb) < 10_000
    _expect(bomb, "too_large")


def test_missing_file_is_a_profile_data_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileDataError) as caught:
        file.load(tmp_path / "nope.json")
    # N13: a missing file is not "malformed: cannot read: no such file"
    assert str(caught.value) == f"{tmp_path / 'nope.json'}: no such file"


def test_combine_remaps_frames_threads_and_spans() -> None:
    a = sample_profile()
    b = sample_profile()
    b.metadata = {"pid": 7}
    b.frames.reverse()  # same frames, other order: indices must be remapped
    for t in b.threads:
        stack = [t.root]
        while stack:
            n = stack.pop()
            n.children = {3 - f: c for f, c in n.children.items()}
            for c in n.children.values():
                c.frame = 3 - c.frame
            stack.extend(n.children.values())
    b.spans = [type(s)(s.thread, 3 - s.frame, s.start_ns, s.end_ns, s.depth) for s in b.spans]
    both = file.combine([a, b])
    assert len(both.frames) == 4
    assert [t.name for t in both.threads] == [
        "pid 4242: MainThread",
        "pid 4242: worker",
        "pid 7: MainThread",
        "pid 7: worker",
    ]
    assert both.threads[2].root == a.threads[0].root
    assert both.spans[len(a.spans) :] == [
        type(s)(s.thread + 2, s.frame, s.start_ns, s.end_ns, s.depth) for s in a.spans
    ]
    assert both.metadata["processes"] == [a.metadata, b.metadata]


def test_combine_refuses_mixed_modes() -> None:
    with pytest.raises(ProfileDataError, match="modes"):
        file.combine([sample_profile(), CallProfile("sample")])
    with pytest.raises(ProfileDataError):
        file.combine([])


def _paths(doc: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.extend(_paths(v, (*path, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(_paths(v, (*path, i)))
    return out


_DOC = json.loads(json.dumps(file.to_json(sample_profile())))
_PATHS = _paths(_DOC)[1:]
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_PATHS), _json_values, st.booleans())
def test_structural_mutations_only_raise_profile_data_error(
    path: tuple[object, ...], value: object, delete: bool
) -> None:
    doc = copy.deepcopy(_DOC)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]
    if delete:
        del parent[path[-1]]  # type: ignore[attr-defined]
    else:
        parent[path[-1]] = value  # type: ignore[index]
    try:
        loaded = file.from_json(doc, path="m.json")
    except ProfileDataError as exc:
        assert "m.json" in str(exc)
        return
    # accepted: it must then be usable by every consumer without crashing
    from profkit.export import registry
    from profkit.report.flat import render_flat
    from profkit.report.text import render_tree

    render_tree(loaded)
    render_flat(loaded)
    for fmt in registry.EXPORTS:
        fmt.writer(loaded)


def test_oversized_regular_file_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose size is known to exceed the cap is refused without reading it."""
    monkeypatch.setattr(file, "MAX_BYTES", 10)
    path = tmp_path / "big.json"
    path.write_bytes(b"{" + b" " * 100 + b"}")
    with pytest.raises(ProfileDataError, match="too large"):
        file.load(path)
