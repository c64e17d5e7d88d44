"""The sampler's readers of untrusted bytes: location tables, ELF files, debug offsets.

Property tests check the location-table decoder against the interpreter's own
``co_lines()``; fuzz tests feed truncated and mutated inputs, which must give an answer
or an AttachError, never another exception.
"""

from __future__ import annotations

import contextlib
import io
import struct
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.sampler import layout
from profkit.sampler._offsets import LAYOUTS
from profkit.sampler.elf import read_symbols
from profkit.sampler.errors import AttachError
from profkit.sampler.linetable import line_for


def _codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


SOURCE = st.lists(
    st.sampled_from(
        [
            "x = 1",
            "if x:\n    y = 2\nelse:\n    y = 3",
            "for i in range(3):\n    x += i",
            "def f(a):\n    return a + 1",
            "try:\n    z = 1 / x\nexcept Exception:\n    z = 0",
            "while x < 10:\n    x += 1",
            "s = [i * 2 for i in range(5)]",
            "",
            "# a comment",
            "with open(__file__) as fh:\n    pass",
            "class K:\n    def m(self):\n        return 1",
        ]
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(SOURCE)
def test_line_for_matches_co_lines(parts):
    code = compile("x = 0\n" + "\n".join(parts) + "\n", "<test>", "exec")
    for c in _codes(code):
        for start, end, line in c.co_lines():
            if line is None:
                continue
            for off in range(start, end, 2):
                assert line_for(c.co_linetable, c.co_firstlineno, off // 2) == line


def test_line_for_on_the_standard_library():
    import json.decoder

    with open(json.decoder.__file__) as f:
        code = compile(f.read(), json.decoder.__file__, "exec")
    checked = 0
    for c in _codes(code):
        for start, _end, line in c.co_lines():
            if line is not None:
                assert line_for(c.co_linetable, c.co_firstlineno, start // 2) == line
                checked += 1
    assert checked > 100


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.integers(-5, 10_000), st.integers(-5, 500))
def test_line_for_never_raises(table, first, offset):
    assert isinstance(line_for(table, first, offset), int)


def _libpython() -> bytes:
    import sysconfig

    lib = sysconfig.get_config_var("LDLIBRARY") or ""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    path = f"{libdir}/{lib}"
    try:
        return open(path, "rb").read()
    except OSError:
        return open(sys.executable, "rb").read()


ELF = _libpython()


def test_elf_finds_the_runtime_symbols():
    syms = read_symbols(io.BytesIO(ELF), "libpython", ("_PyRuntime", "Py_Version"))
    assert syms.symbols.keys() >= {"_PyRuntime", "Py_Version"}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 4096), st.data())
def test_elf_truncated_or_mutated_is_an_attach_error(cut, data):
    raw = bytearray(ELF[: cut * 16] if data.draw(st.booleans()) else ELF[:65536])
    for _ in range(data.draw(st.integers(0, 8))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        read_symbols(io.BytesIO(bytes(raw)), "x.so", ("_PyRuntime",))
    except AttachError as exc:
        assert str(exc).startswith("x.so: offset 0x")


def _debug_offsets_313() -> bytes:
    """A _Py_DebugOffsets as 3.13.0 lays it out, from the generated table's values."""
    t = LAYOUTS["3.13.0"]
    words = [0] * ((layout.DEBUG_OFFSETS_SIZE_313 - 24) // 8)
    # runtime(3) interp(13) tstate(9) frame(6) code(10) ...
    words[2] = t["runtime_interpreters_head"]
    words[3 + 2], words[3 + 3] = t["interp_next"], t["interp_threads_head"]
    words[3 + 8], words[3 + 9] = t["interp_gil"], 1000
    words[3 + 11], words[3 + 12] = 1000 + t["gil_locked"], 1000 + t["gil_holder"]
    ts = 16
    for i, k in ((2, "tstate_next"), (3, "tstate_interp"), (4, "tstate_current_frame")):
        words[ts + i] = t[k]
    words[ts + 5], words[ts + 6], words[ts + 7] = (
        t["tstate_thread_id"],
        t["tstate_native_thread_id"],
        t["tstate_datastack_chunk"],
    )
    return b"xdebugpy" + struct.pack("<QQ", 0x030D00F0, 0) + struct.pack(f"<{len(words)}Q", *words)


def test_debug_offsets_parse():
    lay = layout.from_debug_offsets(_debug_offsets_313())
    t = LAYOUTS["3.13.0"]
    assert lay.version == "3.13.0"
    assert lay.tstate_current_frame == t["tstate_current_frame"]
    assert lay.gil_locked == t["gil_locked"] and lay.gil_holder == t["gil_holder"]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 900), st.data())
def test_debug_offsets_truncated_or_mutated(cut, data):
    raw = bytearray(
        _debug_offsets_313()[:cut] if data.draw(st.booleans()) else _debug_offsets_313()
    )
    for _ in range(data.draw(st.integers(0, 6))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(AttachError):
        layout.from_debug_offsets(bytes(raw))


def test_an_unmeasured_patch_release_uses_its_minors_layout(monkeypatch):
    monkeypatch.delenv("PROFKIT_SAMPLER_LAYOUT", raising=False)
    lay = layout.from_table(0x030B09F0)
    assert (lay.version, lay.assumed_from, lay.verify) == ("3.11.9", "3.11.7", True)
    monkeypatch.setenv("PROFKIT_SAMPLER_LAYOUT", "3.11.7")
    assert layout.from_table(0x030B09F0).verify is False
    with pytest.raises(AttachError, match=r"3\.10\.2"):
        layout.from_table(0x030A02F0)


def test_table_agrees_with_live_313_debug_offsets(target):
    """3.13's published offsets and the header-measured table say the same thing."""
    from profkit.sampler.reader import locate
    from tests.sampler.conftest import SLEEPER, interpreter

    t = target(SLEEPER, interpreter("3.13"))
    lay = locate(t.pid).layout
    table = LAYOUTS["3.13.0"]
    for name, value in table.items():
        if hasattr(lay, name) and name not in ("version",):
            assert getattr(lay, name) == value, name
