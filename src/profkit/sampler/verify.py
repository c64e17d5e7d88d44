"""Checking an assumed layout against the live target before it is trusted.

Why: 3.11 and 3.12 publish no offsets. profkit measured some releases and reads the
others of the same minor with the minor's layout (:data:`~profkit.sampler.layout.SERIES`);
for a release outside the range known to share it (a later patch, a pre-release) the
offsets are checked on what is really there, and refused with a clear message only when
they do not describe it. Wrong offsets would otherwise give garbage stacks or nothing.

What is checked, with bounded reads only (the target keeps running):

* the interpreter's thread list ends (no loop, at most ``MAX_THREADS``) and every thread
  state on it points back to the interpreter;
* the native thread ids read are thread ids of the process (``/proc/PID/task``): at
  least one is, and none is beyond the kernel's largest pid;
* the innermost Python frame of the threads that have one holds a code object: its type
  is ``PyCode_Type`` (when the symbol was found), its ``co_name`` a compact string that
  reads as a function name (``f``, ``<module>``, ``<lambda>``...), its first line sane;
  at least one thread has such a frame (a target running no Python code at all, such as
  an idle embedding application, cannot be checked and is refused).

A structure caught mid-update can fail one check, so a failure is looked at again a few
times (:func:`check_layout`); a layout is refused only when it fails every time.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable

from profkit.sampler.errors import ReadFault
from profkit.sampler.layout import Layout
from profkit.sampler.memory import Memory

#: Most thread states looked at (a torn or wrong list could otherwise run on).
MAX_THREADS = 4096
#: Frames followed past C-stack shims to find a Python one.
_MAX_SHIMS = 16
#: Linux's largest pid (PID_MAX_LIMIT on 64-bit): a native id above it is not an id.
PID_MAX = 1 << 22
_FRAME_OWNED_BY_CSTACK = 3  # 3.12's entry frames (3.11 has no such owner value)
_MAX_NAME = 256
_NAME = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*|<[a-z]+>)\Z")
_u64 = struct.Struct("<Q").unpack_from
_i32 = struct.Struct("<i").unpack_from


def _name_ok(mem: Memory, lay: Layout, address: int) -> bool:
    """Whether ``address`` holds a compact str that reads as a function name."""
    if not address:
        return False
    raw = mem.read(address, lay.unicode_compact_size)
    length = _u64(raw, lay.unicode_length)[0]
    state = int.from_bytes(raw[lay.unicode_state : lay.unicode_state + 4], "little")
    kind = (state >> lay.unicode_kind_bit) & 7
    if not (state >> lay.unicode_compact_bit) & 1 or kind not in (1, 2, 4):
        return False
    if not 0 < length <= _MAX_NAME:
        return False
    if not (state >> lay.unicode_ascii_bit) & 1:
        return True  # a non-ASCII identifier: a str of sane length is all we can ask
    text = mem.read(address + lay.unicode_ascii_size, length)
    return _NAME.match(text.decode("ascii", "replace")) is not None


def _frame_problem(mem: Memory, lay: Layout, frame: int, code_type: int) -> str | None:
    """None when the innermost Python frame at or after ``frame`` holds a sane code
    object, else what is wrong with it."""
    for _ in range(_MAX_SHIMS):
        raw = mem.read(frame, lay.frame_span)
        if raw[lay.frame_owner] != _FRAME_OWNED_BY_CSTACK:
            break
        frame = _u64(raw, lay.frame_previous)[0]
        if not frame:
            return None  # only C-stack shims: nothing to check on this thread
    else:
        return "a frame chain of C-stack entries only"
    code = _u64(raw, lay.frame_code)[0]
    if not code:
        return f"frame {frame:#x} has no code object"
    body = mem.read(code, lay.code_span)
    if code_type and _u64(body, lay.object_type)[0] != code_type:
        return f"frame {frame:#x}: {code:#x} is not a code object (its type is not PyCode_Type)"
    first = _i32(body, lay.code_firstlineno)[0]
    if not 0 <= first < 10_000_000:
        return f"code object {code:#x}: first line {first}"
    if not _name_ok(mem, lay, _u64(body, lay.code_name)[0]):
        return f"code object {code:#x}: co_name is not a function name"
    return None


def layout_problem(
    mem: Memory, lay: Layout, runtime: int, code_type: int, tasks: set[int]
) -> str | None:
    """None when ``lay`` describes the target (see the module's list), else what did not
    match. ``tasks``: the process's thread ids as /proc lists them."""
    try:
        interp = mem.u64(runtime + lay.runtime_interpreters_head)
        if not interp:
            return "no interpreter (not initialized yet)"
        states: list[bytes] = []
        seen: set[int] = set()
        tstate = mem.u64(interp + lay.interp_threads_head)
        while tstate:
            if tstate in seen or len(states) >= MAX_THREADS:
                return "the interpreter's thread list does not end"
            seen.add(tstate)
            raw = mem.read(tstate, lay.tstate_span)
            if _u64(raw, lay.tstate_interp)[0] != interp:
                return f"thread state {tstate:#x} does not point back to its interpreter"
            states.append(raw)
            tstate = _u64(raw, lay.tstate_next)[0]
        if not states:
            return "no thread state to check (yet)"
        natives = [_u64(raw, lay.tstate_native_thread_id)[0] for raw in states]
        wild = [n for n in natives if n >= PID_MAX]
        if wild:
            return f"native thread id {wild[0]} read from a thread state is no thread id"
        if not tasks & set(natives):
            return (
                f"no native thread id read ({', '.join(map(str, natives[:4]))}) is a thread "
                "of the process"
            )
        problems: list[str] = []
        good = 0
        for raw in states:
            frame = _current_frame(mem, lay, raw)
            if not frame:
                continue
            problem = _frame_problem(mem, lay, frame, code_type)
            if problem is None:
                good += 1
            else:
                problems.append(problem)
        if problems and not good:
            return problems[0]
        if not good:
            # A live program runs Python code in some thread; a chain that is never
            # found is a wrong current-frame offset (or a target not running Python yet).
            return "no thread has a Python frame to check"
        return None
    except ReadFault as exc:
        return f"a read failed: {exc}"


def _current_frame(mem: Memory, lay: Layout, raw: bytes) -> int:
    if lay.tstate_current_frame is not None:
        return int(_u64(raw, lay.tstate_current_frame)[0])
    assert lay.tstate_cframe is not None and lay.cframe_current_frame is not None
    cframe = _u64(raw, lay.tstate_cframe)[0]
    return mem.u64(cframe + lay.cframe_current_frame) if cframe else 0


def check_layout(
    mem: Memory,
    lay: Layout,
    runtime: int,
    code_type: int,
    tasks: Callable[[], set[int]],
    tries: int = 4,
    pause_s: float = 0.002,
) -> str | None:
    """:func:`layout_problem`, looked at again up to ``tries`` times while it fails (a
    structure caught mid-update fails once, a wrong layout every time); None once it
    passes, else the last problem found."""
    problem: str | None = None
    for attempt in range(tries):
        if attempt:
            time.sleep(pause_s)
        problem = layout_problem(mem, lay, runtime, code_type, tasks())
        if problem is None:
            return None
    return problem
