"""The session's id tables and the per-function verdicts the backends consult.

The three tables (``idtables.py``) turn code objects, modules and threads into ids; the
catalog adds what a backend asks once per function (:meth:`Catalog.discover`: register it,
deliver its first execution, run the filter) and the frame walk that turns a stack into
ids. It knows nothing of hooks or of the session's lifecycle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import CodeType, FrameType

from profkit.api.callback import ProfilerCallback
from profkit.api.events import EventMask
from profkit.api.ids import FunctionId
from profkit.api.info import FunctionInfo, ModuleInfo, ThreadInfo
from profkit.api.names import OWN_CODE_DIRS
from profkit.collect.failure import FailureRule
from profkit.collect.idtables import FunctionTable, ModuleTable, ThreadTable
from profkit.collect.plan import Fn

#: profkit's own collector/api/profiler code is never profiled (no recursion, no noise):
#: the one list, :data:`profkit.api.names.OWN_CODE_DIRS`.
_OWN_DIRS = OWN_CODE_DIRS

#: Bits of a per-function mask (``set_function_events``) that switch its notifications on.
_PER_FUNCTION_ON = EventMask.ENTER_LEAVE | EventMask.CODE_TRANSITIONS | EventMask.EXCEPTIONS


class Catalog:
    """Id tables plus the filter's verdicts, for one attached profiler."""

    def __init__(self, profiler: ProfilerCallback, rule: FailureRule) -> None:
        self.functions = FunctionTable()
        self.modules = ModuleTable()
        self.threads = ThreadTable(threading.get_ident)
        self.filter: Callable[[FunctionInfo], bool] | None = None
        self.function_events: dict[int, EventMask] = {}
        #: the profiler's ``function_first_execution`` while the mask selects it
        self.first_execution: Fn = None
        self._rule = rule
        self._own_codes = _own_codes(profiler)

    def discover(self, code: CodeType) -> tuple[FunctionId, bool]:
        """Slow path for a code object: register it, deliver first execution, filter it.

        Returns the id and whether the function's notifications are wanted.
        """
        functions = self.functions
        fid, new = functions.add_code(code)
        if new and self.first_execution is not None and not self.is_own(code):
            self._rule.call("function_first_execution", self.first_execution, fid)
        verdict = functions.accepted.get(fid)
        if verdict is None:
            verdict = self._judge(fid, code)
            if verdict is None:
                return fid, False  # the filter hit the recursion limit: ask it next time
            functions.accepted[fid] = verdict
        return fid, verdict

    def _judge(self, fid: FunctionId, code: CodeType) -> bool | None:
        if self.is_own(code):
            return False
        special = self.function_events.get(fid)
        if special is not None:
            return bool(special & _PER_FUNCTION_ON)
        accept = self.filter
        if accept is None:
            return True
        try:
            return bool(accept(self.functions.info(fid)))
        except RecursionError:
            return None  # the program's RecursionError (see failure.py)
        except BaseException as exc:
            self._rule.fail(exc, "function filter")
            return False

    def is_own(self, code: CodeType) -> bool:
        """Whether ``code`` is profkit's or the profiler's own (never reported)."""
        return code.co_filename.startswith(_OWN_DIRS) or id(code) in self._own_codes

    def set_filter(self, accept: Callable[[FunctionInfo], bool]) -> None:
        """A new filter: every verdict is asked again."""
        self.filter = accept
        self.functions.accepted.clear()

    def set_function_events(self, function_id: FunctionId, mask: EventMask) -> None:
        """Override the filter for one (valid) function id."""
        self.functions.info(function_id)  # validates the id
        self.function_events[function_id] = EventMask(mask)
        self.functions.accepted.pop(function_id, None)

    def frames_to_ids(
        self, frame: FrameType | None, *, accepted_only: bool
    ) -> tuple[FunctionId, ...]:
        """Walk ``f_back`` from ``frame``; ids outermost first."""
        out: list[FunctionId] = []
        accepted = self.functions.accepted
        codes = self.functions.codes
        while frame is not None:
            code = frame.f_code
            fid = id(code)
            ok = accepted.get(fid)
            if ok is None or fid not in codes:
                fid, ok = self.discover(code)
            if ok or (not accepted_only and not self.is_own(code)):
                out.append(FunctionId(fid))
            frame = frame.f_back
        out.reverse()
        return tuple(out)

    def shadow_stack(self, frame: FrameType | None, pre: dict[int, int]) -> tuple[FunctionId, ...]:
        """Accepted functions on the stack from ``frame``, outermost first, leaving out
        the frames in ``pre`` (frame address → code id of frames running at attach)."""
        out: list[FunctionId] = []
        accepted = self.functions.accepted
        while frame is not None:
            code = frame.f_code
            ok = accepted.get(id(code))
            if ok is None:
                ok = self.discover(code)[1]
            if ok and pre.get(id(frame)) != id(code):
                out.append(FunctionId(id(code)))
            frame = frame.f_back
        out.reverse()
        return tuple(out)


#: :func:`_own_codes` by profiler class: a forked child attaches a fresh profiler of its
#: parent's class, and walking the class again cost every fork ~1 ms (issue 22, item 13).
#: (The classes are held, so the ids stay theirs.)
_own_codes_by_class: dict[type, frozenset[int]] = {}


def _own_codes(profiler: ProfilerCallback) -> frozenset[int]:
    """Code objects of the profiler's own methods: never profiled, so no recursion.

    Also the methods ``dataclass`` generated for profkit's info records: their code says
    ``<string>``, not a profkit file, and profkit builds such records on the program's
    threads (a thread ending), which were reported as the program's calls.
    """
    klass = type(profiler)
    codes = _own_codes_by_class.get(klass)
    if codes is None:
        codes = _own_codes_by_class[klass] = _own_codes_of(klass)
    return codes


def _own_codes_of(profiler_class: type) -> frozenset[int]:
    codes = set()
    for record in (FunctionInfo, ModuleInfo, ThreadInfo):
        for value in vars(record).values():
            code = getattr(value, "__code__", None)
            if isinstance(code, CodeType):
                codes.add(id(code))
    for klass in profiler_class.__mro__:
        if klass is ProfilerCallback or klass is object:
            continue
        for value in vars(klass).values():
            func = getattr(value, "__func__", value)
            code = getattr(func, "__code__", None)
            if isinstance(code, CodeType):
                codes.add(id(code))
    return frozenset(codes)
