"""Keep profkit's profile function when the program profiles a piece of itself (3.11).

Why: on 3.11 trace mode records through the thread's profile function (``sys.setprofile``),
and there is only one. A program that uses cProfile (``Profile.enable()``/``disable()``,
as pytest plugins and benchmark harnesses do) takes it over, and on giving it back leaves
none: every later call went unrecorded, silently.

``cProfile.Profile.enable`` is wrapped while the program runs (when cProfile is imported,
through a meta path finder that acts on that one name): before the real ``enable`` it notes
where, and sets a global trace function (unless the program has one: a debugger, coverage)
that waits for the program's profiler to be gone: at the first call made after
``disable()`` it puts profkit's profile function back on that thread, as it was when the
program started, and removes itself. Nothing runs inside the program's own profiling (so
its own cProfile counts what it counts bare); the program's profiled section pays one
trace call per Python call. ``disable()`` itself is not wrapped: a Python wrapper would be
a frame the program's cProfile records.

``sys.setprofile`` is not wrapped: a Python wrapper's frame would reach the program's own
profile function (``profile.py`` asserts on frames it did not see called). If the program
leaves the thread with another profile function (or none), the run says so at the end.
On 3.12+ profkit records through ``sys.monitoring``: nothing to guard.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

_PROFILE_MODULE = "cProfile"


class HookGuard:
    """Wraps ``sys.setprofile`` (and cProfile's ``disable``) between :meth:`install` and
    :meth:`uninstall`; acts only while armed with profkit's hook."""

    def __init__(self) -> None:
        self.hook: Callable[..., Any] | None = None
        self.taken_at: str | None = None  #: where the program first took the hook over
        self._patched: list[tuple[Any, str, Any, Any]] = []
        self._finder: _Finder | None = None

    # -- life cycle ------------------------------------------------------------------------

    def install(self) -> None:
        """Put the wrappers in place (inert until :meth:`arm`)."""
        module = sys.modules.get(_PROFILE_MODULE)
        if module is not None:
            self._patch_cprofile(module)
        else:
            self._finder = _Finder(self._patch_cprofile)
            sys.meta_path.insert(0, self._finder)

    def arm(self, hook: Callable[..., Any] | None) -> None:
        """Guard ``hook`` (the thread's profile function once profkit attached; None: 3.12+,
        nothing to guard)."""
        self.hook = hook

    def disarm(self) -> None:
        """profkit itself is about to remove its hook: let it. On the way, note whether the
        program left this (the main) thread with a profile function other than profkit's."""
        hook = self.hook
        self.hook = None
        if hook is not None and self.taken_at is None and sys.getprofile() is not hook:
            self.taken_at = "sys.setprofile"

    def uninstall(self) -> None:
        """Put everything back (where nobody replaced our wrappers meanwhile)."""
        self.hook = None
        if self._finder is not None:
            with contextlib.suppress(ValueError):  # (the program removed it)
                sys.meta_path.remove(self._finder)
            self._finder = None
        for owner, name, original, wrapper in reversed(self._patched):
            if _own(owner, name) is not wrapper:
                continue  # replaced by someone else since: theirs now
            if original is None:
                delattr(owner, name)  # (a class that inherited it)
            else:
                setattr(owner, name, original)
        self._patched.clear()

    def note(self) -> str | None:
        """One line for the end of the run, if the program took the profile function over."""
        taken = self.taken_at
        if taken is None:
            return None
        if taken == "sys.setprofile":
            return (
                "profkit: note: the program replaced or removed profkit's profile function "
                "(sys.setprofile): calls on the main thread after that were not recorded\n"
            )
        return (
            f"profkit: note: the program's own profiler took profkit's profile function over "
            f"({taken}): calls made while it was enabled were not recorded\n"
        )

    def _patch(self, owner: Any, name: str, wrapper: Any) -> None:
        self._patched.append((owner, name, _own(owner, name), wrapper))
        setattr(owner, name, wrapper)

    def _patch_cprofile(self, module: Any) -> None:
        found = getattr(module, "Profile", None)
        if not isinstance(found, type) or "enable" in found.__dict__:
            return  # not the cProfile we know (or wrapped already)
        profile_class: Any = found
        real_enable = profile_class.enable
        guard = self

        def enable(self: Any, *args: Any, **kwargs: Any) -> None:
            hook = guard.hook
            if hook is not None and sys.getprofile() is guard.hook:
                if guard.taken_at is None:
                    guard.taken_at = f"cProfile.Profile.enable at {_caller(2)}"
                if sys.gettrace() is None:
                    sys.settrace(guard._waiter(hook, sys._getframe(0), real_enable))
            real_enable(self, *args, **kwargs)  # last: nothing of ours after it

        enable.__name__ = "enable"
        enable.__qualname__ = f"{profile_class.__qualname__}.enable"
        enable.__doc__ = real_enable.__doc__
        enable.__wrapped__ = real_enable  # type: ignore[attr-defined]
        self._patch(profile_class, "enable", enable)

    def _waiter(
        self, hook: Callable[..., Any], opened: Any, real_enable: Any
    ) -> Callable[..., Any]:
        """A global trace function that puts ``hook`` back at the first call made after
        the program's profiler let go of the thread, then removes itself.

        ``hook`` saw the ``enable`` call begin (``opened``: the wrapper's frame) but not the
        returns made while the program's profiler held the thread (the wrapper's, and
        ``with cProfile.Profile():``'s ``__enter__``): they are given to it first, dated
        now, so later calls are not recorded under frames that have long returned."""
        guard = self
        getprofile, setprofile, settrace = sys.getprofile, sys.setprofile, sys.settrace

        def waiter(frame: Any, event: str, arg: Any) -> None:
            if getprofile() is None:
                settrace(None)
                if guard.hook is hook:  # (profkit still recording)
                    _close_returned(hook, opened, frame, real_enable)
                    setprofile(hook)  # called for this very call: trace comes first
            return None  # no line events

        return waiter


def _close_returned(hook: Callable[..., Any], opened: Any, now: Any, real_enable: Any) -> None:
    """Give ``hook`` the ends it missed: the C call of ``enable`` made from ``opened``, then
    ``opened`` and its callers up to the first one still running below ``now``."""
    live = set()
    frame = now.f_back
    while frame is not None:
        live.add(id(frame))
        frame = frame.f_back
    try:
        hook(opened, "c_return", real_enable)
        frame = opened
        while frame is not None and id(frame) not in live:
            hook(frame, "return", None)
            frame = frame.f_back
    except Exception:  # the profile may be off by these frames; the program is not
        pass


def _own(owner: Any, name: str) -> Any:
    """``owner``'s own attribute ``name`` (a class's, not inherited), or None."""
    return owner.__dict__.get(name)


def _caller(depth: int) -> str:
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return "?"
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"


class _Finder:
    """A meta path finder that only notices the import of cProfile, to wrap it once it has
    run; it finds nothing itself."""

    def __init__(self, patch: Callable[[Any], None]) -> None:
        self._patch = patch

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != _PROFILE_MODULE:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader, patch = spec.loader, self._patch

        class _Loader:
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                patch(module)

            def __getattr__(self, name: str) -> Any:
                return getattr(loader, name)

        spec.loader = _Loader()  # type: ignore[assignment]
        return spec
