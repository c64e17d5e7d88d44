"""The streaming saver writes what ``calltree.file.save`` writes, and says when it is slow."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profkit.calltree import file, stream_writer
from profkit.calltree.model import CallProfile, Frame, Span, ThreadTree
from tests.calltree.strategies import profiles


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(profile=profiles())
def test_same_bytes_as_file_save(tmp_path: Path, profile: CallProfile) -> None:
    stream_writer.save(profile, tmp_path / "a.json")
    file.save(profile, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert file.load(tmp_path / "a.json") == file.load(tmp_path / "b.json")


def test_gzip_and_many_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_writer, "BATCH", 3)
    profile = CallProfile("trace")
    tree = ThreadTree(1, "main")
    node = tree.root
    for depth in range(20):  # deep, so every batch boundary falls inside the tree
        node = node.child(profile.frame_id(Frame(f"f{depth % 5}")))
        node.calls, node.inclusive_ns = 1, 100 - depth
    profile.threads.append(tree)
    profile.spans.extend(Span(0, 0, i, i + 1, 0) for i in range(10))
    stream_writer.save(profile, tmp_path / "p.json.gz")
    file.save(profile, tmp_path / "q.json")
    raw = gzip.decompress((tmp_path / "p.json.gz").read_bytes())
    assert raw == (tmp_path / "q.json").read_bytes()
    assert file.load(tmp_path / "p.json.gz") == profile


def test_a_slow_save_is_announced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_writer, "ANNOUNCE_AFTER", 0.0)
    original = stream_writer._write

    def slow(profile: CallProfile, write: object) -> None:
        import time

        time.sleep(0.2)
        original(profile, write)  # type: ignore[arg-type]

    monkeypatch.setattr(stream_writer, "_write", slow)
    out = io.StringIO()
    stream_writer.save(CallProfile("trace"), tmp_path / "p.json", announce=out)
    assert "profkit: saving the profile to" in out.getvalue()
    assert file.load(tmp_path / "p.json") == CallProfile("trace")


def test_a_quick_save_says_nothing_and_a_failed_one_leaves_no_file(tmp_path: Path) -> None:
    out = io.StringIO()
    stream_writer.save(CallProfile("trace"), tmp_path / "p.json", announce=out)
    assert out.getvalue() == ""
    with pytest.raises(OSError):
        stream_writer.save(CallProfile("trace"), tmp_path / "missing" / "p.json")
    assert not (tmp_path / "missing").exists()


class _Odd:
    """An object ``json`` describes by ``default=repr``."""

    def __repr__(self) -> str:
        return "<odd \u00e9>"


class _Int(int):
    pass


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))
    | st.builds(_Odd)
    | st.builds(_Int, st.integers())
)
_keys = st.text() | st.integers() | st.floats() | st.booleans() | st.none()
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(), inner, max_size=6)
        | st.dictionaries(_keys, inner, max_size=4)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=_values)
def test_parts_are_json_dumps_bytes(value: object) -> None:
    """The writer encodes without importing ``json`` (its C encoder straight), and must
    write exactly what ``json.dumps`` with the same options does: NaN and infinities,
    lone surrogates, non-string keys, subclasses, ``default=repr`` objects."""
    reference = json.dumps(value, separators=(",", ":"), default=repr).encode("utf-8")
    assert stream_writer._dumps(value) == reference


def test_a_cycle_is_reported_as_json_reports_it() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        json.dumps(loop, separators=(",", ":"), default=repr)
    with pytest.raises(ValueError, match="Circular reference"):
        stream_writer._dumps(loop)
