"""A target run as a child process, as a shell would run it: the one way engines do it.

``profkit run --mode sample`` (:mod:`profkit.sampler.command`), ``profkit run app.dll``
(:mod:`profkit.clr.launch`) and the .NET sampling engine run the program as a child and
must end as it ended. The rules, in one place:

* The child gets profkit's stdin, stdout and stderr (or what the caller passes) and its
  own environment; nothing of profkit is in between.
* **Ctrl-C** reaches the child from the terminal (same process group). profkit ignores
  it while the child runs and keeps working (sampling, waiting), so the profile of an
  interrupted program is still saved. The ignore is installed *after* the child started:
  an ignored signal is inherited across ``exec``.
* **SIGTERM** sent to profkit alone is passed on: the program ends as it would (its exit
  handlers run, a .NET profiler writes its result), then profkit saves and dies of
  SIGTERM too (:func:`profkit.runner.outcome.exit_signal`).
* The status maps to an :class:`~profkit.engine.contract.Outcome` one way
  (:func:`~profkit.engine.contract.outcome_of_returncode`: a signal is ``128 + N``).

Signals are only touched from the main thread (``signal.signal``'s rule); elsewhere the
child simply runs and is waited for.

Usage::

    with run_child([host, "app.dll", *args], env=env) as child:
        while child.running():
            ...                       # sample it, read its output, ...
        outcome = child.wait()        # the Outcome; child.returncode is Popen's
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from profkit.engine.contract import Outcome, outcome_of_returncode


class Child:
    """A started child process (see :func:`run_child`)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self.pid = proc.pid

    def running(self) -> bool:
        """True until the child has ended (it is then reaped: no zombie is left)."""
        return self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """``Popen.returncode``: None while running, negative when a signal ended it."""
        return self._proc.returncode

    def wait(self) -> Outcome:
        """Wait for the child to end, however long (a Ctrl-C delivered to profkit while the
        ignore is not in place is the child's too: keep waiting); how it ended."""
        while True:
            try:
                return outcome_of_returncode(self._proc.wait())
            except KeyboardInterrupt:
                continue

    def terminate(self) -> None:
        """Pass SIGTERM on (nothing if the child has ended)."""
        self.send(signal.SIGTERM)

    def send(self, signum: int) -> None:
        """Send ``signum`` to the child unless it has ended."""
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):  # ended in between
                self._proc.send_signal(signum)


@contextlib.contextmanager
def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
) -> Iterator[Child]:
    """Start ``argv`` as a child with the signal rules above in force until the block ends.

    ``stdin``/``stdout``/``stderr`` are :class:`subprocess.Popen`'s (default: profkit's
    own). Raises :class:`OSError` when the program cannot be started. The block should end
    with :meth:`Child.wait`; the child is not killed if it ends otherwise.
    """
    proc = subprocess.Popen(
        list(argv),
        env=None if env is None else dict(env),
        cwd=cwd,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
    )
    child = Child(proc)
    saved: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        saved[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    try:
        yield child
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)
