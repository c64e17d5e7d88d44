"""Finding the interpreter in another process: which file holds ``_PyRuntime``, where it
is mapped, and which CPython release (hence which :class:`~profkit.sampler.layout.Layout`).

Kept apart from the reader because it runs once per attach and is all about files and
symbols (ELF, ``/proc/PID/maps``, ``Py_Version``), while the reader is about one sample.
"""

from __future__ import annotations

from profkit._record import record
from profkit.sampler import layout as layouts
from profkit.sampler.elf import read_symbols
from profkit.sampler.errors import AttachError
from profkit.sampler.layout import Layout
from profkit.sampler.memory import Memory
from profkit.sampler.procinfo import (
    exe_path,
    open_target_file,
    python_candidates,
    read_maps,
    version_from_name,
)


@record(frozen=True)
class Target:
    """Where the interpreter is in the target, found once per attach."""

    pid: int
    path: str  #: the file holding ``_PyRuntime`` (libpython or the executable)
    runtime: int  #: address of ``_PyRuntime``
    code_type: int  #: address of ``PyCode_Type`` (0 when not found)
    layout: Layout


def locate(pid: int) -> Target:
    """Find the interpreter in ``pid``; AttachError saying what was found when there is none."""
    if pid <= 0:
        raise AttachError(f"pid {pid}: not a process id")
    maps = read_maps(pid)
    candidates = python_candidates(pid, maps)
    mem = Memory(pid)
    for path, start in candidates:
        try:
            with open(open_target_file(pid, path), "rb") as f:
                syms = read_symbols(f, path, ("_PyRuntime", "Py_Version", "PyCode_Type"))
        except OSError as exc:
            raise AttachError(f"pid {pid}: cannot read {path}: {exc.strerror}") from None
        runtime = syms.symbols.get("_PyRuntime")
        if runtime is None:
            continue
        bias = start - (syms.base_vaddr & ~0xFFF)
        named = version_from_name(path)
        if "Py_Version" not in syms.symbols:
            raise AttachError(
                f"pid {pid}: found Python {named or '(version unknown)'} ({path}): the sampler "
                "supports CPython 3.11, 3.12 and 3.13"
            )
        hexversion = mem.u64(bias + syms.symbols["Py_Version"]) & 0xFFFFFFFF
        minor = hexversion >> 16
        if minor == 0x030D:
            raw = mem.read(bias + runtime, layouts.DEBUG_OFFSETS_SIZE_313)
            lay = layouts.from_debug_offsets(raw)
        elif minor in (0x030B, 0x030C):
            lay = layouts.from_table(hexversion)
        else:
            v = f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}.{(hexversion >> 8) & 0xFF}"
            raise AttachError(
                f"pid {pid}: found CPython {v} ({path}): the sampler supports CPython 3.11, "
                "3.12 and 3.13"
            )
        code_type = syms.symbols.get("PyCode_Type", 0)
        return Target(pid, path, bias + runtime, bias + code_type if code_type else 0, lay)
    exe = exe_path(pid) or "(unreadable executable)"
    named = next((n for p, _ in candidates if (n := version_from_name(p)) is not None), None)
    if named is not None:
        raise AttachError(
            f"pid {pid}: found Python {named} ({exe}) but no _PyRuntime symbol in it: "
            "the sampler supports CPython 3.11, 3.12 and 3.13"
        )
    raise AttachError(f"pid {pid}: not a Python process ({exe}: no libpython or _PyRuntime)")
