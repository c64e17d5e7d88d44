"""Attach a profiler at interpreter start-up when the environment asks for it.

The analogue of ``CORECLR_ENABLE_PROFILING`` / ``CORECLR_PROFILER``. The wheel installs
``profkit_startup.pth`` into site-packages; its one line tests
``PROFKIT_ENABLE_PROFILING`` in ``os.environ`` *before* importing anything, so a process
that is not profiled pays one dict lookup. When the variable is set, it calls
:func:`process_startup`, which reads (every variable is a row of the one settings table,
:mod:`profkit.settings`, parsed by that row's parser):

=============================  ==============================================================
``PROFKIT_ENABLE_PROFILING``   ``1`` (or ``true``/``yes``/``on``) to attach; anything else: off
``PROFKIT_PROFILER``           ``pkg.module:Class`` or a name in entry-point group
                               ``profkit.profilers``; the class is called with no arguments,
                               or, if it offers ``from_settings``, built by
                               :func:`profkit.runner.activation.build` from the ``PROFKIT_*``
                               settings (profkit's own profilers: they then save at exit)
``PROFKIT_BACKEND``            ``auto`` (default), ``monitoring``, ``evalframe`` (3.11),
                               ``setprofile``, ``sampler``
``PROFKIT_SAMPLE_INTERVAL``    seconds between samples (default ``0.001``)
``PROFKIT_INTERVAL``           the same as a duration (``1ms``, ``250us``), used when
                               ``PROFKIT_SAMPLE_INTERVAL`` is unset
``PROFKIT_SAMPLE_CLOCK``       ``wall`` (default) or ``cpu``
``PROFKIT_NATIVE``             ``off``: the collector stays in pure Python (``attach(native=)``)
=============================  ==============================================================

Child processes inherit the environment, so subprocesses and ``multiprocessing`` workers
(spawn and forkserver start a new interpreter; for fork, :mod:`profkit.collect` re-attaches
a fresh profiler in the child, or resets the parent's in place: :func:`resume_in_child`)
are profiled too. Nothing here raises or prints to stdout:
a bad setting is one ``profkit:`` line on stderr and the program runs unprofiled. That
holds for anything a profiler raises while it is built or attached, ``SystemExit`` and
``KeyboardInterrupt`` included: escaping from a ``.pth`` line, any exception kills the
interpreter with "Fatal Python error: init_import_site".
"""

from __future__ import annotations

import os
import sys

from profkit.collect import runs_in_forked_children, terminate

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

ENABLE_VAR = "PROFKIT_ENABLE_PROFILING"
PROFILER_VAR = "PROFKIT_PROFILER"
BACKEND_VAR = "PROFKIT_BACKEND"
NATIVE_VAR = "PROFKIT_NATIVE"
INTERVAL_VAR = "PROFKIT_SAMPLE_INTERVAL"
USER_INTERVAL_VAR = "PROFKIT_INTERVAL"
CLOCK_VAR = "PROFKIT_SAMPLE_CLOCK"
ENTRY_POINT_GROUP = "profkit.profilers"

_done = (
    False  #: process_startup ran in this process (a venv's lib64 → lib makes the .pth run twice)
)


def _reset_after_fork() -> None:
    """A forked child is a new process: it may attach its own profiler."""
    global _done
    _done = False


#: [the session to go on with in a forked child, a copy of the environment's raw items when
#: it was attached, ``ready``, ``forked``]: a forked child whose environment is the same (so
#: is ``PROFKIT_ENABLE_PROFILING`` and ``PROFKIT_PROFILER``) resets that session in place
#: (:func:`resume_in_child`) when ``ready()`` says the profiler can be the one this hook
#: would attach there, and then calls ``forked()``. Set by :func:`process_startup` (the
#: profiler it attached, with ``profkit.runner.activation``'s checks) and by ``profkit
#: run`` (its own profiler, :func:`resume_as`). The items are compared as dicts, in C and
#: with no allocation: building a key of forty tuples there was enough, in a parent whose
#: youngest generation was near its threshold, to set off a collection in every child
#: (130 more pages copied).
_attached: list[Any] = []


def resume_as(attached: Any, ready: Any, forked: Any) -> None:
    """Let forked children go on with ``attached`` (reset in place, see
    :func:`resume_in_child`) while the environment stays as it is now. ``ready()`` runs in
    the child before the reset and may hand the profiler the child's settings (True: it
    can be this process's profiler; it is dropped when anything fails after); ``forked()``
    runs once the reset has succeeded."""
    raw = getattr(os.environ, "_data", None)
    _attached[:] = [attached, dict(raw) if isinstance(raw, dict) else None, ready, forked]
    runs_in_forked_children(resume_in_child, forked)


def resume_in_child(current: Any) -> bool:
    """In a forked child: go on with ``current``, the parent's session, the profiler reset
    in place, when this hook would attach the same profiler from the same environment
    here (issue 22, item 13; see ``Session.reset_after_fork``). False: it could not, and
    the caller drops it and attaches anew."""
    if not _attached or _attached[0] is not current:
        return False
    raw, ready, forked = _attached[1], _attached[2], _attached[3]
    if raw is None or getattr(os.environ, "_data", None) != raw or not ready():
        return False
    if not current._session.reset_after_fork():
        return False
    forked()
    terminate.install()  # the deadline timer is not inherited (see terminate.install)
    return True


def enabled(environ: Any = None) -> bool:
    """Whether the environment asks for a profiler."""
    env = os.environ if environ is None else environ
    text = env.get(ENABLE_VAR)
    if text is None:
        return False
    from profkit.settings import parse_enable

    return parse_enable(str(text))


def process_startup() -> Any:
    """Attach the profiler named by the environment; idempotent; never raises.

    Returns the :class:`~profkit.collect.AttachedSession`, or None when profiling is off,
    a profiler is already attached (the ``.pth`` can run twice when a directory is twice
    on ``sys.path``), or the settings are bad (reported on stderr).
    """
    global _done
    if not enabled() or _done:
        return None
    _done = True  # also after a failure: report it once, not once per .pth copy
    from profkit.collect import attach, current_session

    if current_session() is not None:
        return None
    spec = os.environ.get(PROFILER_VAR, "").strip()
    try:
        from profkit import settings

        if not spec:
            raise LookupError(f"{ENABLE_VAR} is set but {PROFILER_VAR} is empty")
        factory = load_profiler(spec)
        from profkit.runner import activation

        profiler = activation.build(factory, os.environ)
        attached = attach(
            profiler,
            settings.read(os.environ, "backend") or "auto",
            sample_interval=_sample_interval(),
            sample_clock=settings.read(os.environ, "sample_clock"),
            native=settings.read(os.environ, "native") != "off",
        )
        if attached.active:  # recording: no import here (it would be in the profile)
            terminate.install()  # Pool.terminate()'s SIGTERM saves before it kills
            resume_as(attached, activation.same_cwd, activation.forked)
        return attached
    except BaseException as exc:  # a profiler's SystemExit/KeyboardInterrupt too
        _report(f"profkit: cannot attach profiler {spec!r}: {type(exc).__name__}: {exc}")
        return None


def _sample_interval() -> float:
    """Seconds between samples: ``PROFKIT_SAMPLE_INTERVAL`` (seconds), else the user-facing
    ``PROFKIT_INTERVAL`` (a duration such as ``1ms``, as ``profkit run --interval`` takes),
    else 1 ms. A bad value raises, and is reported as a failure to attach."""
    from profkit.settings import sample_interval_s

    return sample_interval_s(os.environ)


#: Factories resolved in this process, by spec: a forked child (which attaches afresh, see
#: :func:`profkit.collect._after_fork_in_child`) reuses its parent's instead of scanning
#: every installed distribution's entry points again (~25 ms a fork; issue 22, item 13).
_factories: dict[str, Any] = {}


def load_profiler(spec: str) -> Any:
    """Resolve ``pkg.module:Class`` or an entry-point name to the profiler factory."""
    factory = _factories.get(spec)
    if factory is None:
        factory = _factories[spec] = _resolve(spec)
    return factory


def _resolve(spec: str) -> Any:
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        import importlib

        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == spec:
            return ep.load()
    raise LookupError(
        f"no profiler named {spec!r}: use pkg.module:Class or a name registered in the "
        f"{ENTRY_POINT_GROUP!r} entry-point group"
    )


def _report(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except BaseException:  # no stderr (or a hostile one): stay silent
        pass
