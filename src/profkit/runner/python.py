"""Run a Python program in this process exactly as ``python`` would, and report how it ended.

``python script.py args`` / ``python -m module args`` / ``python -c code args`` each set
``sys.argv``, ``sys.path[0]`` and ``__main__`` in their own way; :class:`Program` repeats
that (pyinstrument's and coverage's runners are the model): the script's real directory,
the current directory for ``-m``, ``''`` for ``-c``, and ``sys.path`` left alone under
``-P``. The program's own exception, ``SystemExit`` or ``KeyboardInterrupt`` is *caught and
returned* (:class:`Outcome`), so the caller can save the profile first and then end the
process the way the program would have.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import io
import os
import sys
import threading
import types
from collections.abc import Callable
from types import FrameType, TracebackType

from profkit._record import record
from profkit.api.names import is_profkit_module
from profkit.engine import modspec
from profkit.errors import UsageError
from profkit.runner import signals
from profkit.runner.finding import Prepared, compile_source, module_details, need_main
from profkit.runner.outcome import Outcome, Terminated, outcome_of

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any, Literal

    Kind = Literal["script", "module", "code"]

_OWN_FILE = os.path.abspath(__file__)


@record(frozen=True)
class Program:
    """What to run: ``kind`` is script, module or code; ``target`` the path/name/text."""

    kind: Kind
    target: str
    args: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """Short name for file names and messages."""
        if self.kind == "code":
            return "c"
        if self.kind == "module":
            return self.target.replace(".__main__", "")
        return os.path.basename(self.target).rsplit(".", 1)[0] or "script"

    def prepare(self) -> Prepared:
        """Find and compile the program before any profiling (fail early, cleanly).

        Compiling here keeps runpy's and the import system's work of *finding* the
        program out of its profile, as it is invisible when ``python`` runs it.
        """
        if self.kind == "script":
            if not os.path.exists(self.target):
                raise UsageError(f"can't open file {self.target!r}: No such file or directory")
            if os.path.isdir(self.target):
                need_main(self.target)
                return Prepared(None, {})  # a directory app: runpy.run_path runs it
            path = os.path.abspath(self.target)  # __main__.__file__ is absolute since 3.9
            try:
                with io.open_code(path) as f:
                    source = f.read()
            except OSError as exc:
                raise UsageError(f"can't open file {self.target!r}: {exc.strerror}") from None
            # A zip app ends with a zip directory (its end record's signature is PK\5\6);
            # only then is zipfile (a few ms of start-up) worth importing to be sure.
            if b"PK\x05\x06" in source[-65_557:]:
                import zipfile

                if zipfile.is_zipfile(path):
                    need_main(self.target)
                    return Prepared(None, {})  # a zip app: runpy.run_path runs it
            code = compile_source(source, path, self.target)
            loader = importlib.machinery.SourceFileLoader("__main__", path)
            return Prepared(code, {"__file__": path, "__loader__": loader})
        if self.kind == "module":
            saved = sys.path[:]
            if not sys.flags.safe_path and sys.path:
                sys.path[0] = self._path0()  # `python -m` looks the module up from here
            try:
                return module_details(self.target)
            finally:
                sys.path[:] = saved
        return Prepared(compile_source(self.target, "<string>", "-c"), {})

    def run(
        self,
        prepared: Prepared,
        start: Callable[[], None],
        stop: Callable[[], None],
        main_done: Callable[[], None] = lambda: None,
    ) -> Outcome:
        """Set up argv/path/__main__, ``start()`` profiling, run, ``stop()``, restore.

        ``main_done()`` is called when the main code has ended, before waiting for the
        program's non-daemon threads. Returns how the program ended; never raises for the
        program's own exceptions. (``profkit run`` itself calls :meth:`begin`, executes
        the code in its own shallowest frame, and calls :meth:`Running.end`.)
        """
        running = self.begin(prepared, start)
        ended: BaseException | None = None
        try:
            running.execute()
        except BaseException as exc:
            ended = exc
        return running.end(ended, stop, main_done)

    def begin(self, prepared: Prepared, start: Callable[[], None]) -> Running:
        """Set up argv/path/``__main__`` and SIGTERM, ``start()`` profiling; the code to run.

        A failure to ``start()`` is profkit's error, not the program's: it propagates, with
        everything put back.
        """
        running = Running(self, prepared)
        argv0 = {"script": self.target, "module": "-m", "code": "-c"}[self.kind]
        if self.kind == "module" and prepared.package is None:  # else: once it is imported
            argv0 = str(prepared.globals.get("__file__") or argv0)
        sys.argv = [argv0, *self.args]
        if not sys.flags.safe_path and sys.path:
            sys.path[0] = self._path0()
        signals.install()
        try:
            if prepared.code is not None:
                running.globals = _main_module(prepared).__dict__
            start()
        except BaseException:
            running.restore()
            raise
        return running

    def _path0(self) -> str:
        if self.kind == "script":
            return os.path.dirname(os.path.realpath(self.target))
        if self.kind == "module":
            return os.getcwd()
        return ""


class Running:
    """A program between :meth:`Program.begin` and :meth:`end`: what to execute, and
    everything to put back afterwards.

    The caller executes :attr:`code` in :attr:`globals` itself (``exec``) — or
    :meth:`execute` does — so that as few of profkit's frames as possible sit under the
    program's ``<module>`` (``inspect.stack()``, the recursion limit: see docs/elt.md).
    A directory or zip app has no :attr:`code`: ``runpy.run_path(`` :attr:`path` ``)``.
    """

    def __init__(self, program: Program, prepared: Prepared) -> None:
        self.code = prepared.code
        self.path = program.target
        #: the package still to import before :attr:`code` runs (see :meth:`import_package`)
        self.package = prepared.package
        spec = prepared.globals.get("__spec__")
        self._spec_name: str | None = spec.name if spec is not None else None
        self._found_in = modspec.found_in(spec) if spec is not None else None
        self._argv0: str = prepared.globals.get("__file__") or "-m"
        self.globals: dict[str, Any] = {}
        self._file_run = program.kind == "script" and prepared.code is not None
        self._saved_argv = sys.argv[:]
        self._saved_path0 = sys.path[0] if sys.path else None
        self._saved_main = sys.modules.get("__main__")
        self._limit = sys.getrecursionlimit()

    @property
    def recursion_limit(self) -> int:
        """The recursion limit before the program ran (profkit's own work needs it)."""
        return self._limit

    def import_package(self) -> None:
        """``-m pkg.mod``: import ``pkg`` as ``python -m`` does before running the module
        (runpy's ``__import__``), inside the recording: its ``__init__`` is the program's
        code (pytest's whole import under ``-m pytest``). What it raises is the program's,
        as under python (a traceback, status 1). ``sys.argv[0]`` is ``-m`` meanwhile, then
        the module's file, as runpy leaves them. Nothing of profkit's is called on the way
        (it would be recorded) but where the package moved the module (a rewritten
        ``__path__``): then the module is found again, where python would find it."""
        package, self.package = self.package, None
        if package is None:
            return
        __import__(package)
        try:
            moved = self._found_in is None or self._found_in not in sys.modules[package].__path__
        except (KeyError, AttributeError):
            moved = True
        if moved and self._spec_name:
            found = module_details(self._spec_name)
            self.code = found.code
            self.globals.update(found.globals)
            self._argv0 = found.globals["__file__"] or "-m"
        if sys.argv:
            sys.argv[0] = self._argv0

    def execute(self) -> None:
        """Run the program's main code (in a frame of this method: :meth:`Program.run`)."""
        self.import_package()
        if self.code is None:
            import runpy  # a directory or zip app only (the console script never loads it)

            runpy.run_path(self.path, run_name="__main__")
        else:
            exec(self.code, self.globals)

    def end(
        self,
        ended: BaseException | None,
        stop: Callable[[], None],
        main_done: Callable[[], None] = lambda: None,
    ) -> Outcome:
        """After the main code ended (``ended``: what it raised): wait for the program's
        threads, ``stop()`` profiling, put everything back; how the program ended.

        python waits for non-daemon threads after an uncaught exception, ``SystemExit``
        or Ctrl-C in ``__main__`` too, so their work belongs in the profile; only after
        SIGTERM (which would have killed python) is there no wait. A second Ctrl-C stops
        the wait, as it does python's (after a normal end it is how the program ended).
        """
        try:
            if not isinstance(ended, Terminated):
                try:
                    main_done()
                    _join_threads()
                except BaseException as exc:
                    if ended is None:
                        ended = exc
            # A program may have set a recursion limit of 30: profkit's own work from here
            # on (detach, building and saving the tree) needs ordinary depth.
            if sys.getrecursionlimit() < self._limit:
                sys.setrecursionlimit(self._limit)
            stop()  # first: nothing of ours below is profiled
            return outcome_of(None if ended is None else _trim(ended))
        finally:
            self.restore()

    def restore(self) -> None:
        """Put back argv, ``sys.path[0]``, ``__main__`` and SIGTERM as they were (the
        program's own are kept for :func:`hand_back`)."""
        global _finished
        signals.uninstall()
        main = sys.modules.get("__main__")
        if main is not None and main.__dict__ is self.globals:
            path0 = sys.path[0] if sys.path else None
            _finished = _Finished(sys.argv, path0, main, self._file_run)
        sys.argv = self._saved_argv
        if self._saved_path0 is not None and not sys.flags.safe_path and sys.path:
            sys.path[0] = self._saved_path0
        if self._saved_main is not None:
            sys.modules["__main__"] = self._saved_main


@record(frozen=True)
class _Finished:
    """A finished program's interpreter state, kept until :func:`hand_back`."""

    argv: list[str]
    path0: str | None
    main: types.ModuleType
    file_run: bool  #: a script file (not -m, -c, a directory or a zip app)


#: The last program that ran in this process, once profkit put its own state back.
_finished: _Finished | None = None


def hand_back() -> None:
    """Give the interpreter's end back to the program that ran last: its ``__main__``,
    ``sys.argv`` and ``sys.path[0]``, as ``python`` leaves them for the exit handlers.

    Called by the commands that run a program (``run``, ``heap run``) once profkit's own
    work is done, just before the process ends. Why: python keeps ``__main__`` in
    ``sys.modules`` until its finalization, *after* the ``atexit`` handlers, so the
    program's globals outlive them. Dropped with profkit's own ``__main__`` put back, a
    module global died first and its ``weakref.finalize`` callback printed before the
    program's ``atexit`` handler (issue 22, item 12); its handlers also read profkit's
    argv. Like python after a script file (``_PyRun_SimpleFileObject``), ``__main__``
    loses ``__file__`` and ``__cached__``.
    """
    global _finished
    finished, _finished = _finished, None
    if finished is None:
        return
    sys.argv = finished.argv
    if finished.path0 is not None and not sys.flags.safe_path and sys.path:
        sys.path[0] = finished.path0
    if finished.file_run:
        finished.main.__dict__.pop("__file__", None)
        finished.main.__dict__.pop("__cached__", None)
    sys.modules["__main__"] = finished.main


def _main_module(prepared: Prepared) -> types.ModuleType:
    """A fresh ``__main__`` with the program's globals, in ``sys.modules``."""
    main = types.ModuleType("__main__")
    main.__dict__.update(
        {
            "__builtins__": builtins,
            "__cached__": None,
            "__package__": None,
            "__spec__": None,
            "__loader__": None,
        }
    )
    main.__dict__.update(prepared.globals)
    sys.modules["__main__"] = main
    return main


def _join_threads() -> None:
    """Wait for non-daemon threads, as the interpreter does before it exits."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon and thread.is_alive():
            thread.join()


def _trim(exc: BaseException) -> BaseException:
    """Drop our own and runpy's frames from the front of the traceback (python shows none)."""
    tb: TracebackType | None = exc.__traceback__
    own = {_OWN_FILE}
    runpy_file = getattr(sys.modules.get("runpy"), "__file__", None)
    if runpy_file:  # runpy not loaded: none of its frames can be there
        own.add(os.path.abspath(runpy_file))
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in own:
        tb = tb.tb_next
    while tb is not None and _is_profkit_frame(tb.tb_frame):
        tb = tb.tb_next
    return exc.with_traceback(tb) if tb is not None else exc


def _is_profkit_frame(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    return isinstance(name, str) and is_profkit_module(name)
