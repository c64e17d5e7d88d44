"""Child processes of a profiled program: the environment that profiles them, their files.

With ``--subprocesses`` (the default) every Python child — ``subprocess``,
``multiprocessing`` spawn/forkserver workers, forked children — attaches the same profiler
at start-up through environment activation, with the parent's exact settings except that
each writes ``<output stem>.<pid><suffix>`` and prints no tree; the parent lists the files
afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from profkit.export.destination import PID, child_template
from profkit.settings import COLLECTOR_INTERVAL_VAR, Settings, collector_interval_text


def child_environment(settings: Settings, output: str, profiler_spec: str) -> dict[str, str]:
    """The variables a child needs to attach ``profiler_spec`` with the parent's settings."""
    stream = settings.stream
    if stream and stream != "stderr":  # each child its own file, never the parent's
        stream = os.path.abspath(child_template(stream, default_suffix=""))
    child = settings.replace(
        output=os.path.abspath(child_template(output)), tree=False, stream=stream
    )
    return {
        "PROFKIT_ENABLE_PROFILING": "1",
        "PROFKIT_PROFILER": profiler_spec,
        # The collector's own variable wins over PROFKIT_INTERVAL: keep the two equal.
        COLLECTOR_INTERVAL_VAR: collector_interval_text(settings),
        **child.serialize(),
    }


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``variables`` for the duration (children inherit it); restored
    afterwards, so an in-process caller is left clean."""
    saved = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def child_files(path: str, started: float) -> list[str]:
    """The profiles children of a run that began at ``started`` wrote next to ``path``."""
    # What glob("<stem>.[0-9]*<suffix>") would find, without importing glob (start-up time).
    directory, name = os.path.split(child_template(path))
    head, _, tail = name.partition(PID)
    try:
        entries = os.listdir(directory or ".")
    except OSError:
        return []
    found = []
    for entry in entries:
        middle = entry[len(head) : len(entry) - len(tail)]
        if (
            entry.startswith(head)
            and entry.endswith(tail)
            and len(entry) > len(head) + len(tail)
            and middle[:1].isdigit()
        ):
            full = os.path.join(directory, entry)
            if _mtime(full) >= started - 1:
                found.append(full)
    return sorted(found)


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0
