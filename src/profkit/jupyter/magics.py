"""``%profkit`` and ``%%profkit``: profile a statement or a cell, show the flame graph inline.

::

    %load_ext profkit
    %%profkit --mode sample --prefix mylib -o run.json
    work()

The cell runs in the notebook's own namespace, as it would without the magic: its last
expression is the magic's value (so ``Out[n]`` is unchanged), an exception it raises is
raised again, unchanged, after the profile of what ran is shown. The profile is recorded
by the profiler ``profkit run`` uses for the mode, in process (:data:`profkit.runner.choice.
CHOICES`), attached just before the cell's first line and detached after its last, and
shown as profkit's HTML view in an ``<iframe srcdoc>``: one self-contained page, no
network and no server, as pyinstrument's and scalene's magics do. ``-o FILE`` also saves
it, in the format ``FILE``'s ending names (as ``profkit run -o``).

IPython is imported only here, and this module only when the extension is loaded.
"""

from __future__ import annotations

import argparse
import ast
import html
import os
import re
import shlex
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from profkit.calltree.model import CallProfile
from profkit.collect import attach, current_session, detach
from profkit.errors import ProfkitError, UsageError
from profkit.export import registry
from profkit.export.destination import Destination
from profkit.runner.choice import CHOICES
from profkit.settings import Settings

#: The inline view's height: the HTML page scrolls inside it.
FRAME_HEIGHT = 600


class _Parser(argparse.ArgumentParser):
    """argparse that raises (a magic must never ``sys.exit`` the kernel)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%profkit: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError(message or self.format_help())


def parser() -> argparse.ArgumentParser:
    """The magic's options: ``profkit run``'s, by the same names."""
    p = _Parser(prog="%profkit", add_help=False, description="Profile a statement or a cell.")
    p.add_argument("--mode", "-m", choices=("trace", "sample", "memory"), default=None)
    p.add_argument("--prefix", default=None, help="keep only these modules (a,b.c)")
    p.add_argument("--basetime", default=None, help="trace mode: hide shorter calls")
    p.add_argument("--interval", default=None, help="sample mode: sampling interval")
    p.add_argument("--alloc-sample", default=None, help="memory mode: bytes between samples")
    p.add_argument("--output", "-o", default=None, help="also save the profile here")
    p.add_argument("--format", "-F", default="", help="the saved file's format")
    p.add_argument("--no-html", action="store_true", help="show nothing inline")
    p.add_argument("--help", "-h", action="help")
    return p


def settings_from(options: argparse.Namespace, environ: dict[str, str]) -> Settings:
    """The run's settings: ``PROFKIT_*`` variables, then the magic's options (as the CLI)."""
    flags = {
        "mode": options.mode,
        "prefixes": options.prefix,
        "basetime_ns": options.basetime,
        "interval_ns": options.interval,
        "alloc_sample_bytes": options.alloc_sample,
    }
    return Settings.from_env(environ).with_flags(flags).replace(subprocesses=False)


class Cell:
    """A statement or cell compiled for running: its body, and its last expression apart
    (evaluated for the value, as IPython's own ``run_cell`` shows it)."""

    def __init__(self, shell: Any, source: str) -> None:
        python = shell.transform_cell(source)  # %magics and !commands inside become calls
        self.filename: str = shell.compile.cache(python)  # tracebacks show the cell's lines
        tree = ast.parse(python, self.filename)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        self.body = compile(tree, self.filename, "exec", dont_inherit=True)
        self.last = (
            None
            if last is None
            else compile(ast.Expression(last.value), self.filename, "eval", dont_inherit=True)
        )

    def run(self, namespace: dict[str, Any]) -> Any:
        exec(self.body, namespace)
        return None if self.last is None else eval(self.last, namespace)


def profile_cell(
    cell: Cell, namespace: dict[str, Any], settings: Settings
) -> tuple[Any, BaseException | None, CallProfile]:
    """Run ``cell`` under the mode's in-process profiler: (value, exception, profile)."""
    if current_session() is not None:
        raise UsageError("%profkit: this process is already being profiled")
    factory = _profiler_factory(settings.mode)
    # Everything on the stack now is IPython's (and ours): never shown, whatever the
    # sampler sees above the cell. Hidden frames' time goes to their caller.
    outer = _stack_files(sys._getframe())
    profiler = factory(
        settings,
        standalone=False,
        paused=True,
        main_module=(cell.filename, "__main__"),
        internal_files=outer,
    )
    attach(
        profiler,
        sample_interval=settings.interval_ns / 1e9,
        sample_clock=settings.sample_clock,
        native=settings.native != "off",
    )
    value: Any = None
    error: BaseException | None = None
    try:
        profiler.start_events()
        try:
            value = cell.run(namespace)
        except BaseException as exc:  # the cell's own: raised again by the caller
            error = exc
        finally:
            profiler.stop_events()
    finally:
        detach()
    profile = profiler.profile if profiler.profile is not None else profiler.build_profile()
    return value, error, profile


def _profiler_factory(mode: str) -> Callable[..., Any]:
    """The in-process profiler ``profkit run`` uses for ``mode`` (the one choice table)."""
    for row in CHOICES:
        if row.mode == mode and "code" in row.kinds and row.engine.endswith(":InProcessEngine"):
            return row.load_profiler()
    raise UsageError(f"%profkit: no in-process profiler records --mode {mode}")


def _stack_files(frame: Any) -> frozenset[str]:
    files = set()
    while frame is not None:
        files.add(frame.f_code.co_filename)
        frame = frame.f_back
    return frozenset(files)


def inline_html(profile: CallProfile) -> str:
    """profkit's HTML view of ``profile`` as one ``<iframe>`` (its page in ``srcdoc``):
    the page's own script and style stay inside it, whatever the notebook's are. In a
    ``<div>``: IPython warns of a bare ``<iframe>`` (it suggests ``IFrame``, which needs a
    URL, so a server or a file)."""
    page = registry.get("html").writer(profile).decode("utf-8", "replace")
    return (
        f'<div class="profkit"><iframe srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{FRAME_HEIGHT}px;border:1px solid #ddd" '
        f'title="profkit flame graph"></iframe></div>'
    )


def magic(
    shell: Any, line: str, cell: str | None, display: Callable[[str], None]
) -> tuple[Any, BaseException | None]:
    """``%profkit [options] statement`` / ``%%profkit [options]`` + cell: run it profiled,
    show the view; (its value, the exception it raised). Raises :class:`UsageError` for
    the magic's own mistakes, before the cell runs."""
    if cell is None:
        words, source = split_line(line)
    else:
        words, source = shlex.split(line), cell
    options = parser().parse_args(words)
    if not source.strip():
        raise UsageError("%profkit: nothing to run (usage: %profkit [options] statement)")
    settings = settings_from(options, dict(os.environ))
    destination = None
    if options.output:  # decided before the run: a bad -o or --format costs no run
        destination = Destination.decide(options.output, options.format, "cell")
    compiled = Cell(shell, source)
    value, error, profile = profile_cell(compiled, shell.user_ns, settings)
    magic_name = "%%profkit" if cell is not None else "%profkit"
    profile.metadata["argv"] = [magic_name, *([line.strip()] if line.strip() else [])]
    if destination is not None:
        problem = destination.save(profile)
        if problem is not None:
            raise UsageError(f"%profkit: cannot write {destination.path}: {problem}")
    if not options.no_html:
        display(inline_html(profile))
    return value, error


def split_line(line: str) -> tuple[list[str], str]:
    """A line magic's option words, and its statement kept as written (quotes, spacing):
    ``%profkit -m sample f("a  b")`` runs ``f("a  b")``. Options come first; the first
    word that is not one (or an option's value) starts the statement."""
    takes_value = {
        name
        for action in parser()._actions
        if action.nargs is None
        for name in action.option_strings
    }
    words: list[str] = []
    expect_value = False
    for match in re.finditer(r"\S+", line):
        word = match.group()
        if expect_value:
            words.append(word)
            expect_value = False
        elif word.startswith("-"):
            words.append(word)
            expect_value = word in takes_value
        else:
            return words, line[match.start() :].strip()
    return words, ""


def register(shell: Any) -> None:
    """``%load_ext``'s work: the ``profkit`` line/cell magic on ``shell``."""
    from IPython.core.error import UsageError as IPythonUsageError
    from IPython.display import HTML
    from IPython.display import display as show

    def profkit(line: str, cell: str | None = None) -> Any:
        try:
            value, error = magic(shell, line, cell, lambda text: show(HTML(text)))
        except ProfkitError as exc:  # the magic's own (options, settings, -o): no traceback
            raise IPythonUsageError(str(exc)) from None
        if error is not None:
            raise error  # the cell's own exception, unchanged
        return value

    profkit.__doc__ = parser().format_help()
    shell.register_magic_function(profkit, magic_kind="line_cell", magic_name="profkit")
