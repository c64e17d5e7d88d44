"""Id tables: code objects, C functions, modules and threads → opaque ids (docs/api.md).

A :data:`~profkit.api.FunctionId` for Python code is ``id(code)``: the backends' hot paths
then compute it with one builtin call and no dict lookup (hashing a code object hashes its
whole bytecode, which measured 3× slower than ``id``). The table keeps every code object it
has seen alive, so an address is never reused while the session lives, which is what the
lifetime table promises. C functions get odd ids from a counter (addresses are even), keyed
by ``module.qualname`` because bound builtin methods are fresh objects on every access.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections.abc import Callable
from types import BuiltinFunctionType, CodeType, ModuleType

from profkit.api.errors import UnknownIdError
from profkit.api.ids import FunctionId, ModuleId, ThreadId
from profkit.api.info import FunctionInfo, ModuleInfo, ThreadInfo
from profkit.api.names import module_of  # the one file -> module rule (also heap's)

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

_BUILTIN = BuiltinFunctionType
_OWNER_TYPES = (type, ModuleType)
_HEAPTYPE = 1 << 9  #: Py_TPFLAGS_HEAPTYPE: a class made at run time (not a static type)
_type_flags = type.__dict__["__flags__"].__get__  #: type's own, whatever the metaclass says

#: co_flags bits of generator, coroutine and async-generator code.
GENERATOR_FLAGS = 0x20 | 0x80 | 0x200


class FunctionTable:
    """FunctionId ⇄ code object / C function, with lazily built :class:`FunctionInfo`.

    Two threads may discover the same code at once (callbacks are not serialized), and
    both must end with the same id and one ``first_execution``. That is decided by
    ``dict.setdefault`` (atomic for int and str keys) rather than a lock: a lock held by
    another thread when the program calls ``fork()`` stays held in the child forever,
    and the child's first discovery (inside ``threading``'s own after-fork handler, which
    runs before profkit's) would then hang.
    """

    def __init__(self) -> None:
        self.codes: dict[int, CodeType] = {}  #: fid → code (keeps the code alive)
        self._born: dict[int, object] = {}  #: fid → the token of the call that created it
        self.accepted: dict[int, bool] = {}  #: fid → filter verdict
        self._natives: dict[str, int] = {}
        #: (id(owner), name) → (id, weak reference to the owner or None): the per-call
        #: shortcut of :meth:`native_id`
        self._natives_quick: dict[tuple[int, str], tuple[int, weakref.ref[Any] | None]] = {}
        self._native_info: dict[int, FunctionInfo] = {}
        self._infos: dict[int, FunctionInfo] = {}
        self._native_counter = itertools.count(1)

    def add_code(self, code: CodeType) -> tuple[FunctionId, bool]:
        """Register ``code``; return its id and whether this call created it."""
        fid = id(code)
        if fid in self.codes:
            return FunctionId(fid), False
        self.codes[fid] = code  # before the claim: a losing thread may look the id up
        token = object()
        return FunctionId(fid), self._born.setdefault(fid, token) is token

    def native_id(self, func: Any) -> FunctionId:
        """The id of a C callable, created on first sight.

        Called per C call by the pure Python paths (the C fast paths cache the answer), so
        a builtin function or method is first looked up by what its name is made of, its
        owner (the type or module it is bound to, else its ``self``'s type) and its name,
        without building the name string.
        """
        if type(func) is _BUILTIN:
            # Builtin getters and identity only: no code of the program's (a metaclass's
            # __hash__ or __class__ property) runs here.
            owner = func.__self__
            kind = type(owner)
            if owner is not None and not issubclass(kind, _OWNER_TYPES):
                owner = kind
            quick = (id(owner), func.__name__)
            hit = self._natives_quick.get(quick)
            if hit is not None and (hit[1] is None or hit[1]() is owner):
                return FunctionId(hit[0])
            fid = self._named_native_id(func)
            # Owners are not kept alive (that would change the program: its weakref
            # callbacks, its memory); a weak reference tells a dead one's successor at
            # the same address. Static types live as long as the interpreter.
            if owner is None or (
                issubclass(type(owner), type) and not _type_flags(owner) & _HEAPTYPE
            ):
                self._natives_quick[quick] = (fid, None)
            else:
                with contextlib.suppress(TypeError):  # an owner without weak references
                    self._natives_quick[quick] = (fid, weakref.ref(owner))
            return FunctionId(fid)
        return FunctionId(self._named_native_id(func))

    def _named_native_id(self, func: Any) -> int:
        """The id of a C callable by its ``module.qualname``, created on first sight."""
        module = getattr(func, "__module__", None)
        if module is None:
            owner = getattr(func, "__self__", None)
            module = type(owner).__module__ if owner is not None else ""
        qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
        key = f"{module}.{qual}"
        fid = self._natives.get(key)
        if fid is None:
            # The info is stored before the id is published, so whoever gets the id can
            # look it up; a thread losing the race leaves an unused info behind.
            candidate = (next(self._native_counter) << 1) | 1
            self._native_info[candidate] = FunctionInfo(
                FunctionId(candidate), str(qual), str(module or "<native>"), "", 0, True, False
            )
            fid = self._natives.setdefault(key, candidate)
        return fid

    def info(self, fid: FunctionId) -> FunctionInfo:
        """FunctionInfo for ``fid``; raises :class:`UnknownIdError` for ids never issued."""
        found = self._infos.get(fid) or self._native_info.get(fid)
        if found is not None:
            return found
        code = self.codes.get(fid)
        if code is None:
            raise UnknownIdError(f"unknown function id {fid:#x}")
        found = code_info(FunctionId(fid), code)
        self._infos[fid] = found
        return found


def code_info(fid: FunctionId, code: CodeType) -> FunctionInfo:
    """Build the FunctionInfo of a code object (slow path, once per function)."""
    filename = code.co_filename
    module = module_of(filename)
    return FunctionInfo(
        fid,
        code.co_qualname,
        module,
        filename,
        code.co_firstlineno,
        False,
        bool(code.co_flags & GENERATOR_FLAGS),
    )


class ModuleTable:
    """ModuleId ⇄ module name/file; ids are sequential and never reused."""

    def __init__(self) -> None:
        self._infos: dict[int, ModuleInfo] = {}
        self._counter = itertools.count(1)

    def new(self, name: str, filename: str | None) -> ModuleId:
        """Issue an id for a module whose load starts now (``next`` on a count is atomic)."""
        mid = ModuleId(next(self._counter))
        self._infos[mid] = ModuleInfo(mid, name, filename)
        return mid

    def set_filename(self, mid: ModuleId, filename: str | None) -> None:
        """Record the file once the load finished."""
        old = self._infos[mid]
        self._infos[mid] = ModuleInfo(mid, old.name, filename)

    def info(self, mid: ModuleId) -> ModuleInfo:
        """ModuleInfo for ``mid``."""
        try:
            return self._infos[mid]
        except KeyError:
            raise UnknownIdError(f"unknown module id {mid}") from None


class ThreadTable:
    """ThreadId (``threading.get_ident()``) → ThreadInfo, live threads and the recently ended."""

    def __init__(self, get_ident: Callable[[], int]) -> None:
        self._get_ident = get_ident
        self._infos: dict[int, ThreadInfo] = {}

    def seen(self, tid: int, name: str, native_id: int | None) -> None:
        """Record a live thread (created now, or found running at attach)."""
        self._infos[tid] = ThreadInfo(ThreadId(tid), name, native_id, True)

    def renamed(self, tid: int, name: str) -> None:
        """Record a new name."""
        old = self._infos.get(tid)
        self._infos[tid] = ThreadInfo(
            ThreadId(tid), name, old.native_id if old else None, old.is_alive if old else True
        )

    def ended(self, tid: int) -> None:
        """Mark the thread finished (its id may later be reused by the OS)."""
        old = self._infos.get(tid)
        if old is not None:
            self._infos[tid] = ThreadInfo(old.thread_id, old.name, old.native_id, False)

    def info(self, tid: ThreadId) -> ThreadInfo:
        """ThreadInfo for ``tid``, looked up in ``threading`` when not yet recorded."""
        found = self._infos.get(tid)
        if found is None:
            for thread in threading.enumerate():
                if thread.ident == tid:
                    self.seen(tid, thread.name, thread.native_id)
                    return self._infos[tid]
            raise UnknownIdError(f"unknown thread id {tid}")
        return found

    def live(self) -> list[ThreadId]:
        """Threads currently alive, as far as profkit knows."""
        alive = {t.ident for t in threading.enumerate()}
        for thread in threading.enumerate():
            if thread.ident is not None and thread.ident not in self._infos:
                self.seen(thread.ident, thread.name, thread.native_id)
        return [ThreadId(t) for t, i in self._infos.items() if i.is_alive and t in alive]
