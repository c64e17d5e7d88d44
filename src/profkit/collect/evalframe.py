"""The ``evalframe`` backend (Python 3.11 only): function enter/leave from a PEP 523
frame-evaluation function (``csrc/evalframe.h``), without a profile function.

Why: on 3.11 a profile function (``sys.setprofile``, cProfile's too) makes the
interpreter trace every bytecode, de-specialize instructions and build a frame object per
call, which alone costs ~0.8x cProfile's whole overhead. A frame-evaluation function sees
each Python frame evaluated (a call, a generator's resume) for ~60 instructions and
leaves the specializing interpreter alone. It never sees C calls, line events or
exceptions beyond a frame's unwinding, so it serves only masks without those
(:data:`CAPABILITIES`): ELT trace mode with ``--no-c-calls``. ``auto`` takes it on 3.11
for such masks (``select.choose``); ``PROFKIT_BACKEND=evalframe`` forces it.

What it reports is what the setprofile backend reports for the same program:

* a plain function: enter before its frame runs, leave after (a return or an exception
  unwinding it alike);
* generators, coroutines, async generators: each resume is an enter (``function_enter``
  the first time, ``function_resume`` later), each suspension a ``function_yield``, the
  end a leave; the call that only creates one (``RETURN_GENERATOR``, before the first
  ``RESUME``) and a ``throw()`` into an unstarted one run none of its code and report
  nothing;
* frames running at attach never pass through the hook: their returns are not reported,
  as the other backends report no leave without its enter; frames open at a rearm (a
  mask or filter change) end without a leave, as under setprofile, whose new hook takes
  their codes for running before it (the profiler closes them at its end, as at
  detach); a generator suspended then resumes, yields and leaves under the new hook;
* code run by the profiler or by this backend's slow path (and, as under any profile
  function, by a trace function) is not reported: the hook raises the thread's
  ``tracing`` counter around it.

The frame-evaluation function is the interpreter's, so every thread is covered, those
running at attach included. If another one is installed (a debugger, a JIT), or the C
part is not built, the backend runs the setprofile backend instead and says why on
stderr (and silently under ``PROFKIT_NATIVE=off``, which asks for the pure-Python one).

Trade-off: with a frame-evaluation function set, 3.11 evaluates every Python call in a
C call of its own (as 3.10 did), so deep recursion takes more C stack; the recursion
limit still bounds it (tests/collect/test_evalframe.py recurses to the default limit).
"""

from __future__ import annotations

import opcode
import sys

from profkit.api.events import EventMask
from profkit.collect.base import Backend, Capabilities
from profkit.collect.context import BackendContext
from profkit.collect.idtables import GENERATOR_FLAGS
from profkit.collect.plan import ALL_EVENTS

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any

try:
    from profkit.collect import _evalframe
except ImportError:  # not built here
    _evalframe = None  # type: ignore[assignment]

#: What a frame-evaluation function cannot see: C calls, a frame's arguments or return
#: value (no frame object is made), exception events; nor the shadow stack (read from the
#: frames, and ``function_enter`` comes before the entered frame is on its thread's stack).
CAPABILITIES = Capabilities(
    events=ALL_EVENTS
    & ~(
        EventMask.CODE_TRANSITIONS
        | EventMask.EXCEPTIONS
        | EventMask.FUNCTION_ARGS
        | EventMask.FUNCTION_RETVAL
        | EventMask.ENABLE_SHADOW_STACK  # read from frames, and the entered one is not linked yet
    ),
    cheap_filter=True,
    all_threads=True,
    full_exceptions=False,
)

# csrc/evalframe.h's statuses
REJECTED, PLAIN, GEN = 0, 1, 2
_RESUME = opcode.opmap["RESUME"]
_YIELD = opcode.opmap["YIELD_VALUE"]


def reason_unavailable() -> str | None:
    """Why this backend cannot run here, or None (a conflicting frame-evaluation function
    is found at start, which then falls back to setprofile)."""
    if sys.version_info[:2] != (3, 11):
        return "the evalframe backend is for Python 3.11 only (3.12+ has sys.monitoring)"
    if _evalframe is None:
        return "its C part (profkit.collect._evalframe) is not built"
    why: str | None = _evalframe.UNAVAILABLE
    return why


def conflict() -> str | None:
    """Another frame-evaluation function is installed (a debugger, a JIT), or None."""
    return None if _evalframe is None else _evalframe.conflict()


def _classifier(ctx: BackendContext) -> Any:
    """First sight of a code object: ``(status, index of its first RESUME)``."""
    discover = ctx.discover

    def classify(code: CodeType) -> tuple[int, int]:
        _fid, ok = discover(code)
        if not ok:
            return REJECTED, 0
        if code.co_flags & GENERATOR_FLAGS:
            raw = code.co_code
            first = next((i for i in range(0, len(raw), 2) if raw[i] == _RESUME), 0)
            return GEN, first // 2
        return PLAIN, 0

    return classify


class EvalframeBackend:
    """PEP 523 collector; see the module docstring."""

    name = "evalframe"
    capabilities = CAPABILITIES

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self._state: list[bool] = [False]
        self._hook: Any = None
        #: the setprofile backend, when this one could not install (see the docstring)
        self._fallback: Backend | None = None

    def start(self) -> None:
        """Install the hook, or start the setprofile backend instead (saying why)."""
        plan = self.ctx.plan
        if not (plan.tracks_calls or plan.first_execution):
            return
        why = reason_unavailable() or (None if self.ctx.native else "PROFKIT_NATIVE=off")
        if why is None:
            self._state = [True]
            self._hook = _evalframe.EvalHook(
                state=self._state,
                classify=_classifier(self.ctx),
                fail=self.ctx.fail,
                enter=plan.enter,
                leave=plan.leave,
                yield_=plan.yield_,
                resume=plan.resume,
                yield_op=_YIELD,
            )
            why = _evalframe.install(self._hook)
            if why is None:
                return
            self._state[0] = False
            self._hook = None
        from profkit.collect.setprofile import SetprofileBackend

        if self.ctx.native:  # (PROFKIT_NATIVE=off asked for the pure-Python collector)
            print(f"profkit: evalframe backend refused ({why}); using setprofile", file=sys.stderr)
        self._fallback = SetprofileBackend(self.ctx)
        self._fallback.start()

    def stop(self) -> None:
        """Remove the hook; safe twice and from inside a callback (a frame being
        evaluated finishes without its leave)."""
        if self._fallback is not None:
            self._fallback.stop()
            self._fallback = None
        hook, self._hook = self._hook, None
        if hook is not None:
            self._state[0] = False
            _evalframe.uninstall(hook)

    def abandon(self) -> None:
        """In a forked child: take the hook out (it is mute there since the fork)."""
        if self._fallback is not None:
            self._fallback.abandon()
            self._fallback = None
            return
        self.stop()

    #: the hook stays installed, mute from the fork on, until resumed
    resumes_after_fork = True

    def resume_after_fork(self) -> None:
        """In a forked child: the hook records again."""
        if self._fallback is not None:
            self._fallback.resume_after_fork()
        elif self._hook is not None:
            _evalframe.resume_after_fork(self._hook)

    def rearm(self) -> None:
        """Rebuild the hook from the new plan. A frame's leave comes only from the hook
        that delivered its enter, while it runs: frames open now get none, as under
        setprofile (test_evalframe.py::test_frames_open_at_a_rearm_as_setprofile)."""
        self.stop()
        self.start()
