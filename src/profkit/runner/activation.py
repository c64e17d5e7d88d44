"""Environment activation of profkit's own profilers: build them from the settings table,
save their profile when the collector shuts them down.

The start-up hook (:mod:`profkit.collect.startup`) loads ``PROFKIT_PROFILER``. A profiler
class that offers ``from_settings(settings, on_profile)`` (the ELT and sampling profilers
do) is built through :func:`build` with the :class:`~profkit.settings.Settings` parsed from
the ``PROFKIT_*`` variables and a :class:`ProfileSaver`; anything else is called with no
arguments, as the API documents. The saver writes ``PROFKIT_OUTPUT`` (default
``profkit-<program>-<pid>-<random>.json``; relative to the directory the process *started*
in) and prints the tree unless ``PROFKIT_TREE=0``. It runs inside the profiler's
``shutdown``, where raising would only get the profiler reported as faulty: a failure to
write is one line on stderr instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from profkit.calltree.model import CallProfile
from profkit.errors import open_file_limit_note
from profkit.settings import Settings

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: The saver of the profiler the start-up hook attached in this process, if any.
_current: ProfileSaver | None = None


class ProfileSaver:
    """Saves (and, if the settings say so, prints) an environment-activated profile."""

    def __init__(self, settings: Settings, base_dir: str) -> None:
        self.settings = settings
        self.base_dir = base_dir
        self.saved_path: str | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """Save nothing: ``profkit run`` replaces this profiler with its own."""
        self.cancelled = True

    def __call__(self, profile: CallProfile) -> None:
        if self.cancelled:
            return
        try:
            self._save(profile)
        except OSError as exc:  # not even profkit's own modules could be opened
            where = self.settings.output or "the profile"
            note = open_file_limit_note(exc)
            _say(f"profkit: cannot write profile {where}: {exc.strerror or exc}{note}\n")

    def _save(self, profile: CallProfile) -> None:
        from profkit.export.destination import Destination, program_label, resolve_output
        from profkit.runner import output

        settings = self.settings
        # The program's label names a default file only (no output, or a directory): made
        # then alone, as it takes a regular expression (``re``, imported for it by each
        # forked child that saves to its own named file otherwise; issue 22, item 13).
        out = settings.output
        named = out is not None and out != "" and not out.endswith(("/", os.sep))
        if named and os.path.isdir(os.path.join(self.base_dir, resolve_output(out or ""))):
            named = False
        label = "" if named else program_label(sys.argv[0] if sys.argv else "")
        # Relative to where the process started (base_dir), not made absolute: base_dir is
        # "" only when that directory was deleted, and then nothing can be.
        where = Destination.decide(
            settings.output, settings.format, label, self.base_dir, absolute=False
        )
        with output.ordinary_recursion_limit():
            error = where.save(profile)
            if error is not None:
                _say(f"profkit: cannot write profile {where.path}: {error}\n")
                return
            self.saved_path = where.path
            if settings.tree:
                _say(output.render(profile, sys.stderr))
                _say(where.announcement(profile.mode))


def build(factory: Callable[..., Any], environ: Mapping[str, str]) -> Any:
    """The profiler the start-up hook attaches: ``factory.from_settings(...)`` when offered
    (settings from ``environ``; a bad value raises :class:`~profkit.errors.SettingsError`),
    else ``factory()``."""
    global _current
    from_settings = getattr(factory, "from_settings", None)
    if from_settings is None:
        return factory()
    settings = settings_from(environ)
    try:
        # A relative output path means "here": where the process was when profiling
        # began, not wherever the program has chdir'ed to by the time it exits.
        base_dir = os.getcwd()
    except OSError:  # the working directory was deleted
        base_dir = ""
    saver = ProfileSaver(settings, base_dir)
    profiler = from_settings(settings, on_profile=saver)
    _current = saver
    return profiler


#: Settings parsed in this process, by the environment they were read from: a forked
#: child (same environment, as a rule) takes its parent's instead of parsing twenty
#: variables again (issue 22, item 13). Settings are frozen.
_parsed: dict[object, Settings] = {}


def settings_from(environ: Mapping[str, str]) -> Settings:
    """:meth:`Settings.from_env`, remembered (a bad value raises, and is not kept)."""
    settings = _parsed.get(key := environ_key(environ))
    if settings is None:
        settings = _parsed[key] = Settings.from_env(environ)
    return settings


def environ_key(environ: Mapping[str, str]) -> object:
    """What the settings depend on, cheaply. For ``os.environ``: its raw items as they
    stand, taken in C (decoding and filtering forty variables in Python was a third of
    what a forked child spent re-attaching); for any other mapping: the ``PROFKIT_*``
    items."""
    raw = getattr(environ, "_data", None) if environ is os.environ else None
    if isinstance(raw, dict):
        return tuple(raw.items())
    return tuple(sorted((k, v) for k, v in environ.items() if k.startswith("PROFKIT_")))


def same_cwd() -> bool:
    """Whether a relative output path would mean the same directory here as for the
    start-up hook's profiler (a forked child of a program that changed directory
    attaches anew, as it always did, and saves relative to where it is)."""
    try:
        return _current is None or _current.base_dir == os.getcwd()
    except OSError:  # the working directory was deleted
        return False


def forked() -> None:
    """In a forked child going on with its parent's profiler (reset in place): the saver
    has saved nothing here yet."""
    if _current is not None:
        _current.saved_path = None


class Handover:
    """``profkit run``'s profiler handed to a forked child of the program, reset in place
    there (issue 22, item 13): what the start-up hook would have built in the child from
    the environment ``profkit run`` set for children (:mod:`profkit.runner.children`) —
    the same class, the child's settings, a :class:`ProfileSaver` — is prepared here, in
    the parent, before recording starts; :meth:`ready` swaps it in, in the child.

    Only when the child's settings differ from the parent profiler's in where it writes
    and whether it prints (``output``, ``tree``, ``stream``; and never a stream, whose
    line writer has a thread): everything the profiler recorded with is then the same.
    """

    def __init__(self, profiler: Any, factory: Any, settings: Settings, base_dir: str) -> None:
        self.profiler = profiler
        self.settings = settings
        self.base_dir = base_dir
        mode = getattr(factory, "mode_override", None)
        if mode is not None and settings.mode != mode:  # as SettingsProfiler does
            self.settings = settings = settings.replace(mode=mode)
        own = getattr(profiler, "settings", None)
        self.usable = (
            type(profiler) is factory
            and isinstance(own, Settings)
            and not settings.stream
            and settings.replace(output=own.output, tree=own.tree, stream=own.stream) == own
        )

    def ready(self) -> bool:
        """In a forked child, before the reset: give the profiler the child's settings and
        saver (False: it cannot take them, and a new profiler is attached instead)."""
        global _current
        adopt = getattr(self.profiler, "adopt_after_fork", None)
        if not self.usable or adopt is None:
            return False
        saver = ProfileSaver(self.settings, self.base_dir)
        if not adopt(self.settings, saver):
            return False
        _current = saver
        return True

    def forked(self) -> None:
        """In a forked child, after the reset: nothing to do (:meth:`ready` made a fresh
        saver); :func:`profkit.collect.startup.resume_as` asks for it."""


def handover(profiler: Any, environ: Mapping[str, str]) -> Handover | None:
    """The :class:`Handover` of ``profiler`` to the forked children that ``environ`` (the
    environment ``profkit run`` set for them) profiles; None when they are not profiled
    or their profiler is not built from settings. A bad setting raises, as it would
    there."""
    from profkit.collect import startup

    if not startup.enabled(environ):
        return None
    factory = startup.load_profiler(environ.get(startup.PROFILER_VAR, "").strip())
    if getattr(factory, "from_settings", None) is None:
        return None
    try:
        base_dir = os.getcwd()
    except OSError:  # the working directory was deleted
        base_dir = ""
    return Handover(profiler, factory, settings_from(environ), base_dir)


def disown() -> None:
    """The start-up hook's profiler in this process will save nothing (see :meth:`cancel`)."""
    global _current
    if _current is not None:
        _current.cancel()
        _current = None


def _say(text: str) -> None:
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    try:
        if stream is not None:
            stream.write(text)
            stream.flush()
    except (OSError, ValueError):
        pass
