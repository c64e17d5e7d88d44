"""The one child-process helper: status -> Outcome, SIGTERM passed on, Ctrl-C left to the
terminal (ignored here, never inherited by the child), signals put back afterwards."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from profkit.engine.child import run_child
from profkit.engine.contract import Outcome


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("pass", Outcome(0)),
        ("raise SystemExit(3)", Outcome(3)),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
            Outcome(128 + 9, died_of=9),
        ),
        (
            "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
            "os.kill(os.getpid(), signal.SIGINT)",
            Outcome(128 + 2, interrupted=True, died_of=2),
        ),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
            Outcome(128 + 15, terminated=True, died_of=15),
        ),
    ],
    ids=["ok", "status", "sigkill", "sigint", "sigterm"],
)
def test_the_status_maps_to_one_outcome(code: str, expected: Outcome) -> None:
    with run_child(_python(code)) as child:
        assert child.pid > 0
        outcome = child.wait()
    assert outcome == expected
    assert child.returncode is not None and not child.running()


def test_ctrl_c_is_ignored_here_while_the_child_runs_and_never_inherited() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    with run_child(_python(code), stdout=subprocess.PIPE) as child:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) not in before
        outcome = child.wait()
    assert outcome.status == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_signals_are_left_alone_off_the_main_thread() -> None:
    seen: list[object] = []

    def worker() -> None:
        with run_child(_python("pass")) as child:
            seen.append(signal.getsignal(signal.SIGINT))
            seen.append(child.wait().status)

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [before, 0]


def test_sigterm_to_profkit_reaches_the_child(tmp_path: object) -> None:
    """The parent (a separate interpreter, so the test runner's own signals stay put) gets
    SIGTERM; the child, a sleeper, dies of it; the parent reports that and exits 0."""
    script = textwrap.dedent(
        """
        import os, signal, sys
        from profkit.engine.child import run_child
        child_code = "import sys, time; sys.stdout.write('up\\\\n'); sys.stdout.flush(); time.sleep(60)"
        with run_child([sys.executable, "-c", child_code], stdout=-1) as child:
            child._proc.stdout.readline()
            os.kill(os.getpid(), signal.SIGTERM)
            outcome = child.wait()
        print(outcome.status, outcome.terminated)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["143", "True"]


def test_a_program_that_cannot_start_raises_oserror(tmp_path: object) -> None:
    with pytest.raises(OSError), run_child(["/nonexistent/program"]):
        pass
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
