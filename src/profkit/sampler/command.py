"""Run a program as a child and sample it from outside: the library side of
``profkit run --mode sample`` (and what :func:`sample_command` gives any caller).

Why a child: the in-process sampler thread can only look when the program hands over
the GIL (every 5 ms), so it sees ~160 samples/s and names the consumer of a tight
generator instead of the generator. Reading the child's memory from here sees the
interpreter as it is, at any rate, without ever pausing it.

The child is the program itself (``python app.py ...``), unchanged: same argv, stdin,
stdout, stderr, exit status. When reading it is not permitted (ptrace scope,
container capabilities), :func:`sample_command` says so in ``outcome.fallback`` so the
caller can run the in-process sampler instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from profkit._record import field, record
from profkit.calltree.model import CallProfile
from profkit.engine.child import Child, run_child
from profkit.sampler.errors import AttachError, PermissionDenied
from profkit.sampler.reader import CodeInfo
from profkit.sampler.session import SamplerOptions, SamplerSession, SamplerStats

#: Seconds a just-started child has to become a readable Python process.
START_WAIT_S = 10.0


@record
class SampleOutcome:
    """What :func:`sample_command` did."""

    returncode: int  #: the child's exit status (negative: killed by that signal)
    profiles: dict[int, CallProfile] = field(default_factory=dict)  #: the child first
    stats: SamplerStats | None = None
    pid: int = 0
    fallback: str = ""  #: why the child could not be sampled ('' when it was)


def sample_command(
    argv: Sequence[str],
    options: SamplerOptions | None = None,
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    keep: Callable[[CodeInfo], bool] | None = None,
    program_only: bool = False,
) -> SampleOutcome:
    """Run ``argv`` (e.g. ``[sys.executable, "app.py"]``) and sample it until it exits.

    Ctrl-C and SIGTERM reach the child as they would without profkit
    (:mod:`profkit.engine.child`: the terminal's Ctrl-C is the child's, SIGTERM is
    forwarded); sampling continues until the child is gone.
    """
    opts = options or SamplerOptions()
    with run_child(argv, env=env, cwd=cwd) as child:
        outcome = SampleOutcome(returncode=0, pid=child.pid)
        try:
            session = SamplerSession(child.pid, opts, wait_s=START_WAIT_S)
        except PermissionDenied as exc:
            outcome.fallback = str(exc)
            outcome.returncode = _wait(child)
            return outcome
        except AttachError as exc:
            if not child.running():  # ended before it could be read: nothing sampled
                outcome.returncode = _wait(child)
                outcome.fallback = f"the program ended before it could be sampled ({exc})"
                return outcome
            outcome.fallback = str(exc)
            outcome.returncode = _wait(child)
            return outcome
        try:
            while True:
                try:
                    session.run(until=lambda: not child.running())
                    break
                except KeyboardInterrupt:
                    continue  # the child got the same Ctrl-C; keep sampling until it ends
        finally:
            session.close()
            outcome.returncode = _wait(child)
        outcome.stats = session.stats
        outcome.profiles = session.profiles(keep, program_only)
        return outcome


def _wait(child: Child) -> int:
    """The child's ``Popen.returncode`` once it ended (negative: killed by that signal)."""
    child.wait()
    assert child.returncode is not None
    return child.returncode
