"""What profkit's own profilers share: built from the parsed settings, one capture filter.

The ELT profilers (trace and sample mode) and the memory profiler are made the same way —
by ``profkit run`` (``factory(settings, standalone=..., paused=..., main_module=...,
internal_files=...)``) and, in child processes, by the start-up hook
(:meth:`SettingsProfiler.from_settings`) — and show the same functions: the program's, not
profkit's machinery, inside ``--prefix`` if one is given. Written once here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from profkit.api import FunctionInfo, ProfilerCallback, ProfilerInfo
from profkit.api.ids import FunctionId
from profkit.api.names import INTERNAL_MODULES, PROFKIT_MAIN, function_module, prefix_matches
from profkit.calltree.model import CallProfile

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any, Self


class SettingsProfiler(ProfilerCallback):
    """A profiler made from profkit's settings that hands its profile to ``on_profile``.

    ``mode_override`` is the mode the class records (its settings are made to say so), or None to
    keep theirs. ``main_module`` is the (file, module name) of a module run as
    ``__main__`` (``profkit run -m``); ``internal_files`` are source files never shown
    whatever their module (profkit's entry points: ``profkit run`` adds its console script).
    """

    mode_override: str | None = None

    def __init__(
        self,
        settings: Any,
        *,
        standalone: bool = True,
        paused: bool = False,
        on_profile: Callable[[CallProfile], None] | None = None,
        main_module: tuple[str, str] | None = None,
        internal_files: Iterable[str] = (),
    ) -> None:
        if settings is None:
            raise TypeError(
                f"{type(self).__name__} needs its settings, e.g. "
                f"{type(self).__name__}(profkit.settings.Settings(...))"
            )
        mode = self.mode_override
        if mode is not None and getattr(settings, "mode", mode) != mode:
            settings = settings.replace(mode=mode)
        self.settings = settings
        self.standalone = standalone
        self.on_profile = on_profile
        self.main_module: tuple[str, str] | None = main_module
        self.internal_files: frozenset[str] = frozenset({PROFKIT_MAIN, *internal_files})
        self.profile: CallProfile | None = None
        self._paused = paused
        self._prefixes: tuple[str, ...] = tuple(getattr(settings, "prefixes", ()))
        self._info: ProfilerInfo | None = None

    @classmethod
    def from_settings(
        cls, settings: Any, on_profile: Callable[[CallProfile], None] | None = None
    ) -> Self:
        """The start-up hook's constructor: parsed settings in, the profile out at shutdown."""
        return cls(settings, on_profile=on_profile)

    def accepts(self, info: FunctionInfo) -> bool:
        """The capture-time filter: inside a prefix (if any) and not profkit's machinery."""
        module = function_module(info.filename, info.module, self.main_module)
        if prefix_matches(module, INTERNAL_MODULES) or info.filename in self.internal_files:
            return False
        return not self._prefixes or prefix_matches(module, self._prefixes)

    def _function_info(self, function_id: FunctionId) -> FunctionInfo:
        assert self._info is not None
        return self._info.get_function_info(function_id)
