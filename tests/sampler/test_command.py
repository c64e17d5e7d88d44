"""sample_command (the library side of ``run --mode sample``) and the error mapping."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

from profkit.sampler import PermissionDenied, ProcessGone, SamplerOptions, sample_command
from profkit.sampler.errors import ReadFault
from profkit.sampler.memory import error_for


def test_child_runs_unchanged_and_is_sampled(tmp_path, capfd):
    script = tmp_path / "app.py"
    script.write_text(
        "import sys, time\n"
        "def work():\n"
        "    end = time.perf_counter() + 0.4\n"
        "    while time.perf_counter() < end:\n"
        "        pass\n"
        "work()\n"
        "print('out', sys.argv[1:])\n"
        "sys.exit(3)\n"
    )
    outcome = sample_command([sys.executable, str(script), "a", "b"], SamplerOptions(rate=500))
    assert outcome.returncode == 3
    assert outcome.fallback == ""
    assert "out ['a', 'b']" in capfd.readouterr().out
    profile = outcome.profiles[outcome.pid]
    assert any(f.name == "__main__.work" for f in profile.frames)
    assert profile.metadata["argv"][1:] == [str(script), "a", "b"]
    assert outcome.stats is not None and outcome.stats.ticks > 0


def test_non_python_child_says_why(tmp_path):
    outcome = sample_command(["sleep", "0.3"], SamplerOptions())
    assert outcome.returncode == 0
    assert "not a Python process" in outcome.fallback or "ended before" in outcome.fallback
    assert not outcome.profiles


def test_child_killed_by_a_signal_reports_it():
    outcome = sample_command(
        [sys.executable, "-c", "import os, signal, time; time.sleep(0.2); os.kill(os.getpid(), 9)"],
        SamplerOptions(),
    )
    assert outcome.returncode == -9


def test_errno_mapping_names_the_cause():
    assert isinstance(error_for(1, errno.ESRCH, 0x1000, 8), ProcessGone)
    denied = error_for(1, errno.EPERM, 0x1000, 8)
    assert isinstance(denied, PermissionDenied)
    assert "not permitted" in str(denied)
    assert any(
        word in str(denied) for word in ("uid", "ptrace_scope", "SYS_PTRACE", "process_vm_readv")
    )
    assert isinstance(error_for(1, errno.EFAULT, 0x1000, 8), ReadFault)


def test_profkit_never_changes_the_childs_stdin(tmp_path):
    script = tmp_path / "echo.py"
    script.write_text("import sys\nprint(sys.stdin.read().upper())\n")
    code = (
        "import sys\nfrom profkit.sampler import sample_command\n"
        f"o = sample_command([sys.executable, {str(script)!r}])\nsys.exit(o.returncode)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], input="hello", capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "HELLO"


def test_permission_reason_names_another_user(monkeypatch, tmp_path):
    from profkit.sampler import memory

    monkeypatch.setattr(memory.os, "geteuid", lambda: 4321)
    reason = memory.permission_reason(1)  # pid 1 belongs to root
    assert "belongs to uid 0" in reason and "uid 4321" in reason


def test_permission_reason_names_the_ptrace_scope(monkeypatch):
    import builtins

    from profkit.sampler import memory

    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if str(path) == "/proc/sys/kernel/yama/ptrace_scope":
            import io

            return io.StringIO("2\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    reason = memory.permission_reason(os.getpid())
    assert "kernel.yama.ptrace_scope is 2" in reason


def test_permission_reason_falls_back_to_the_container_capability(monkeypatch):
    from profkit.sampler import memory

    monkeypatch.setattr(memory.os, "geteuid", lambda: 0)
    reason = memory.permission_reason(os.getpid())
    if "ptrace_scope" not in reason:
        assert "SYS_PTRACE" in reason
