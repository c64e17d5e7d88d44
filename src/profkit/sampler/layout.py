"""Where the sampler finds things in a target interpreter: one :class:`Layout` per version.

3.13+ publishes its offsets in ``_Py_DebugOffsets`` at the start of ``_PyRuntime``;
:func:`from_debug_offsets` parses that (its own layout is fixed within a minor version,
so it is parsed for 3.13 only). 3.11 and 3.12 publish nothing: their offsets come from
:mod:`profkit.sampler._offsets`, measured by ``scripts/gen_python_offsets.py`` on some
patch releases. Every other patch release of the minor uses the minor's measured layout
(:data:`SERIES`): the fields read have not moved within 3.11 or 3.12 (see SERIES for what
was checked), so refusing Debian's 3.11.2 or Ubuntu's 3.12.3 for want of a table (as this
module did) refused working targets. A release outside the range known to share the layout
(a later patch, a pre-release) is marked ``verify``: the reader checks the offsets against
the live target before trusting them (:mod:`profkit.sampler.verify`).
``PROFKIT_SAMPLER_LAYOUT=3.X.Y`` still forces a measured layout, unchecked.
"""

from __future__ import annotations

import os
import struct

from profkit._record import record
from profkit.errors import SettingsError
from profkit.sampler._offsets import LAYOUTS
from profkit.sampler.errors import AttachError
from profkit.settings import read as read_setting

#: ``_Py_DebugOffsets`` of 3.13: cookie, version, free_threaded, then these groups of u64.
_DEBUG_GROUPS_313 = (
    ("runtime", 3),
    ("interp", 13),
    ("tstate", 9),
    ("frame", 6),
    ("code", 10),
    ("object", 2),
    ("type", 4),
    ("tuple", 3),
    ("list", 3),
    ("dict", 3),
    ("float", 2),
    ("long", 3),
    ("bytes", 3),
    ("unicode", 4),
    ("gc", 2),
)
DEBUG_OFFSETS_SIZE_313 = 24 + 8 * sum(n for _, n in _DEBUG_GROUPS_313)
DEBUG_COOKIE = b"xdebugpy"


@record(frozen=True)
class Layout:
    """Byte offsets of every field the sampler reads (names follow CPython's fields)."""

    version: str  #: "3.12.1"; the release the offsets were measured on (or published by)
    runtime_interpreters_head: int
    interp_next: int
    interp_threads_head: int
    tstate_next: int
    tstate_interp: int
    tstate_thread_id: int
    tstate_native_thread_id: int
    tstate_datastack_chunk: int  #: the thread's newest frame-stack chunk (frames live there)
    chunk_previous: int
    chunk_size: int
    tstate_cframe: int | None  #: 3.11/3.12: tstate->cframe->current_frame
    cframe_current_frame: int | None
    tstate_current_frame: int | None  #: 3.13+: tstate->current_frame
    frame_previous: int
    frame_code: int
    frame_instr: int
    frame_owner: int
    code_filename: int
    code_name: int
    code_qualname: int
    code_linetable: int
    code_firstlineno: int
    code_adaptive: int
    object_type: int
    unicode_length: int
    unicode_state: int
    unicode_ascii_size: int
    unicode_compact_size: int
    unicode_kind_bit: int
    unicode_compact_bit: int
    unicode_ascii_bit: int
    bytes_size: int
    bytes_data: int
    runtime_gil_locked: int | None  #: 3.11: the GIL lives in _PyRuntime.ceval.gil
    runtime_gil_holder: int | None
    interp_gil: int | None  #: 3.12+: interp->ceval.gil points to it
    gil_locked: int | None
    gil_holder: int | None
    #: the measured release whose offsets are assumed for this one ('' when measured on it
    #: or published by it)
    assumed_from: str = ""
    #: the assumption is outside the range known to hold: check it on the live target first
    verify: bool = False
    #: for threading's names (0: not known, names come from the kernel): where sys.modules
    #: is, and the few dict/module/type fields read to get threading._active[ident]._name
    interp_modules: int = 0
    dict_keys: int = 0
    dict_values: int = 0
    module_dict: int = 0
    type_basicsize: int = 0
    heaptype_cached_keys: int = 0

    @property
    def provenance(self) -> str:
        """Whose offsets read the target, for the profile's metadata (``sampler.layout``):
        ``own`` (measured on this release or published by it), ``3.11.7`` (another
        release's, the range known to share it or forced), ``3.12.1, checked`` (another
        release's, verified on the target)."""
        if not self.assumed_from:
            return "own"
        return f"{self.assumed_from}, checked" if self.verify else self.assumed_from

    @property
    def tstate_datastack_top(self) -> int:
        """Where the thread's frame-stack top is: PyThreadState declares ``datastack_top``
        right after ``datastack_chunk`` in 3.11, 3.12 and 3.13 (3.13's debug offsets do not
        publish it). A yield-cut walk uses it to tell frames that existed then from newer ones."""
        return self.tstate_datastack_chunk + 8

    @property
    def tstate_span(self) -> int:
        """Bytes to read from a thread state to get every field used."""
        fields = [
            self.tstate_next,
            self.tstate_interp,
            self.tstate_thread_id,
            self.tstate_native_thread_id,
            self.tstate_datastack_top,
            self.tstate_cframe if self.tstate_cframe is not None else 0,
            self.tstate_current_frame if self.tstate_current_frame is not None else 0,
        ]
        return max(fields) + 8

    @property
    def frame_span(self) -> int:
        return max(self.frame_previous, self.frame_code, self.frame_instr, self.frame_owner) + 8

    @property
    def code_span(self) -> int:
        return (
            max(
                self.code_filename,
                self.code_name,
                self.code_qualname,
                self.code_linetable,
                self.code_firstlineno,
                self.object_type,
            )
            + 8
        )


def _version_str(hexversion: int) -> str:
    """``3.12.1``, or ``3.12.0b3`` / ``3.13.0rc1`` for a pre-release (``PY_VERSION_HEX``)."""
    base = f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}.{(hexversion >> 8) & 0xFF}"
    level = {0xA: "a", 0xB: "b", 0xC: "rc"}.get((hexversion >> 4) & 0xF, "")
    return f"{base}{level}{hexversion & 0xF}" if level else base


@record(frozen=True)
class Series:
    """A minor release without published offsets: the measured layout all its patch
    releases are read with, and the patch releases known to share it."""

    minor: str  #: "3.11"
    layout: str  #: the key in LAYOUTS used for every patch release of the minor
    first: int  #: patch releases first..last are known to have that layout
    last: int
    evidence: str  #: how that is known (also said in docs/sampler.md)


#: Known = the fields the sampler reads were compared, offset by offset: measured with
#: ``scripts/gen_python_offsets.py`` on 3.11.2 (Debian 12's headers), 3.11.7 and 3.12.1;
#: and on 3.11.0 and 3.12.0 from the struct definitions py-spy generates from those tags
#: (its ``python_bindings`` modules; py-spy and pystack read every patch release of a
#: minor with one layout). Outside first..last the layout is verified on the target.
SERIES: dict[str, Series] = {
    "3.11": Series("3.11", "3.11.7", 0, 7, "3.11.0, 3.11.2 and 3.11.7 compared"),
    "3.12": Series("3.12", "3.12.1", 0, 1, "3.12.0 and 3.12.1 compared"),
}


def from_table(hexversion: int) -> Layout:
    """The layout for a 3.11/3.12 release: its own measured one, else its minor's
    (:data:`SERIES`, marked ``verify`` outside the known range), else AttachError."""
    version = _version_str(hexversion)
    chosen, verify = _choose_table(hexversion, version)
    t = LAYOUTS[chosen]
    return Layout(
        version=version,
        runtime_interpreters_head=t["runtime_interpreters_head"],
        interp_next=t["interp_next"],
        interp_threads_head=t["interp_threads_head"],
        tstate_next=t["tstate_next"],
        tstate_interp=t["tstate_interp"],
        tstate_thread_id=t["tstate_thread_id"],
        tstate_native_thread_id=t["tstate_native_thread_id"],
        tstate_datastack_chunk=t["tstate_datastack_chunk"],
        chunk_previous=t["chunk_previous"],
        chunk_size=t["chunk_size"],
        tstate_cframe=t.get("tstate_cframe"),
        cframe_current_frame=t.get("cframe_current_frame"),
        tstate_current_frame=t.get("tstate_current_frame"),
        frame_previous=t["frame_previous"],
        frame_code=t["frame_code"],
        frame_instr=t["frame_instr"],
        frame_owner=t["frame_owner"],
        code_filename=t["code_filename"],
        code_name=t["code_name"],
        code_qualname=t["code_qualname"],
        code_linetable=t["code_linetable"],
        code_firstlineno=t["code_firstlineno"],
        code_adaptive=t["code_adaptive"],
        object_type=t["object_type"],
        unicode_length=t["unicode_length"],
        unicode_state=t["unicode_state"],
        unicode_ascii_size=t["unicode_ascii_size"],
        unicode_compact_size=t["unicode_compact_size"],
        unicode_kind_bit=t["unicode_kind_bit"],
        unicode_compact_bit=t["unicode_compact_bit"],
        unicode_ascii_bit=t["unicode_ascii_bit"],
        bytes_size=t["bytes_size"],
        bytes_data=t["bytes_data"],
        runtime_gil_locked=t.get("runtime_gil_locked"),
        runtime_gil_holder=t.get("runtime_gil_holder"),
        interp_gil=t.get("interp_gil"),
        gil_locked=t.get("gil_locked"),
        gil_holder=t.get("gil_holder"),
        assumed_from="" if chosen == version else chosen,
        verify=verify,
        interp_modules=t.get("interp_modules", 0),
        dict_keys=t.get("dict_keys", 0),
        dict_values=t.get("dict_values", 0),
        module_dict=t.get("module_dict", 0),
        type_basicsize=t.get("type_basicsize", 0),
        heaptype_cached_keys=t.get("heaptype_cached_keys", 0),
    )


def _choose_table(hexversion: int, version: str) -> tuple[str, bool]:
    """Which measured table reads ``version``, and whether it must be verified live first
    (see :func:`from_table`); AttachError/SettingsError when none may."""
    minor = f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}"
    patch = (hexversion >> 8) & 0xFF
    final = (hexversion >> 4) & 0xF == 0xF
    known = sorted(v for v in LAYOUTS if v.rsplit(".", 1)[0] == minor)
    assume: str = read_setting(os.environ, "sampler_layout")
    if assume and assume not in LAYOUTS:  # a typo is an error, never "no assumption"
        raise SettingsError(
            f"PROFKIT_SAMPLER_LAYOUT={assume!r}: expected one of the measured layouts "
            f"{', '.join(sorted(LAYOUTS))}"
        )
    series = SERIES.get(minor)
    verify = False
    if version in LAYOUTS:
        chosen = version
    elif assume in known:  # forced by the user: used as it is
        chosen = assume
    elif assume:
        raise AttachError(
            f"found CPython {version}: PROFKIT_SAMPLER_LAYOUT={assume} is not a layout of "
            f"{minor} (measured: {', '.join(known) or 'none'})"
        )
    elif series is not None:
        chosen = series.layout
        verify = not (final and series.first <= patch <= series.last)
    else:
        raise AttachError(
            f"found CPython {version}: the sampler supports CPython 3.11, 3.12 and 3.13+ "
            f"(offset tables cover {', '.join(sorted(LAYOUTS))})"
        )
    return chosen, verify


def describe_series(layout: Layout) -> str:
    """What the refusal of an assumed layout says about it (which releases were measured,
    which are known to share it, how to force or add one)."""
    minor = layout.version.split(".")[0] + "." + layout.version.split(".")[1]
    series = SERIES.get(minor)
    known = (
        f"{minor}.{series.first}-{minor}.{series.last} are known to share it"
        if series
        else "no range is known to share it"
    )
    return (
        f"profkit reads {minor} with the {layout.assumed_from} layout ({known}); set "
        f"PROFKIT_SAMPLER_LAYOUT={layout.assumed_from} to force it, or add the release with "
        "scripts/gen_python_offsets.py"
    )


def from_debug_offsets(raw: bytes) -> Layout:
    """Parse 3.13's ``_Py_DebugOffsets`` (the first bytes of the target's ``_PyRuntime``)."""
    if len(raw) < DEBUG_OFFSETS_SIZE_313 or raw[:8] != DEBUG_COOKIE:
        raise AttachError("_PyRuntime does not start with the _Py_DebugOffsets cookie")
    hexversion, free_threaded = struct.unpack_from("<QQ", raw, 8)
    version = _version_str(hexversion)
    if hexversion >> 16 != 0x030D:
        raise AttachError(
            f"found CPython {version}: its _Py_DebugOffsets layout is not one profkit reads "
            "(3.13 only; newer minors need a profkit update)"
        )
    if free_threaded:
        raise AttachError(f"found CPython {version} free-threaded: not supported by the sampler")
    words = struct.unpack_from(f"<{(DEBUG_OFFSETS_SIZE_313 - 24) // 8}Q", raw, 24)
    groups: dict[str, tuple[int, ...]] = {}
    at = 0
    for name, n in _DEBUG_GROUPS_313:
        groups[name] = words[at : at + n]
        at += n
    rt, it, ts, fr, co = (groups[k] for k in ("runtime", "interp", "tstate", "frame", "code"))
    by, un = groups["bytes"], groups["unicode"]
    gil_base = it[9]
    return Layout(
        version=version,
        runtime_interpreters_head=rt[2],
        interp_next=it[2],
        interp_threads_head=it[3],
        tstate_next=ts[2],
        tstate_interp=ts[3],
        tstate_thread_id=ts[5],
        tstate_native_thread_id=ts[6],
        tstate_datastack_chunk=ts[7],
        # _PyStackChunk {previous, size, top, data[]} is the same struct in 3.11-3.13.
        chunk_previous=0,
        chunk_size=8,
        tstate_cframe=None,
        cframe_current_frame=None,
        tstate_current_frame=ts[4],
        frame_previous=fr[1],
        frame_code=fr[2],
        frame_instr=fr[3],
        frame_owner=fr[5],
        code_filename=co[1],
        code_name=co[2],
        code_qualname=co[3],
        code_linetable=co[4],
        code_firstlineno=co[5],
        code_adaptive=co[9],
        object_type=groups["object"][1],
        unicode_length=un[2],
        unicode_state=un[1],
        unicode_ascii_size=un[3],
        # PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject (3.12+).
        unicode_compact_size=un[3] + 16,
        # The state bit-field (interned:2, kind:3, compact:1, ascii:1) is 3.11-3.13's.
        unicode_kind_bit=2,
        unicode_compact_bit=5,
        unicode_ascii_bit=6,
        bytes_size=by[1],
        bytes_data=by[2],
        runtime_gil_locked=None,
        runtime_gil_holder=None,
        interp_gil=it[8],
        gil_locked=it[11] - gil_base,
        gil_holder=it[12] - gil_base,
        # Published: sys.modules and the dict's fields; measured on 3.13.0 (public
        # structs, fixed within the minor): the module, type and heap type fields.
        interp_modules=it[5],
        dict_keys=groups["dict"][1],
        dict_values=groups["dict"][2],
        module_dict=_T313.get("module_dict", 0),
        type_basicsize=_T313.get("type_basicsize", 0),
        heaptype_cached_keys=_T313.get("heaptype_cached_keys", 0),
    )


_T313: dict[str, int] = LAYOUTS.get("3.13.0", {})
