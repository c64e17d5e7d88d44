"""``profkit run`` behaves like ``python``: argv, __main__, sys.path[0], stdout, exit status.

Each case runs a probe natively and under ``profkit run`` (through ``python -m profkit`` and
the ``profkit`` console script when it is installed) and compares what the probe saw.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file

PROBE = """\
import json, sys
def work():
    return sum(i * i for i in range(1000))
def main():
    work()
    print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                      "file": globals().get("__file__"), "stdin": sys.stdin.read()}))
main()
"""


def _launchers() -> list[list[str]]:
    found = [[sys.executable, "-m", "profkit", "run"]]
    script = Path(sys.executable).parent / "profkit"
    if script.exists():
        found.append([str(script), "run"])
    return found


LAUNCHERS = _launchers()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(cmd: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=60, input="in", **kw
    )  # type: ignore[call-overload, no-any-return]


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text(PROBE)
    pkg = tmp_path / "probepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(PROBE)
    return tmp_path


@pytest.mark.parametrize("launcher", LAUNCHERS, ids=lambda c: Path(c[0]).name)
@pytest.mark.parametrize(
    "program",
    [["probe.py", "a", "-x"], ["-m", "probepkg", "b"], ["-c", PROBE, "c", "--flag"]],
    ids=["script", "module", "code"],
)
def test_run_is_like_python(launcher: list[str], program: list[str], probe_dir: Path) -> None:
    native = _run([sys.executable, *program], probe_dir)
    profiled = _run([*launcher, "-o", "out.json", *program], probe_dir)
    assert native.returncode == 0, native.stderr
    assert profiled.returncode == 0, profiled.stderr
    assert json.loads(profiled.stdout) == json.loads(native.stdout)
    assert "profkit: profile saved to out.json" in profiled.stderr
    profile = profile_file.load(probe_dir / "out.json")
    names = {f.name for f in profile.frames}
    assert any(n == "work" or n.endswith(".work") for n in names), names  # -c code: no module
    assert not any(n.startswith(("runpy", "profkit.cli", "profkit.collect")) for n in names)


def test_default_output_name_and_no_tree(probe_dir: Path) -> None:
    out = _run([*LAUNCHERS[0], "--no-tree", "probe.py"], probe_dir)
    assert out.returncode == 0, out.stderr
    files = list(probe_dir.glob("profkit-probe-*.json"))
    assert len(files) == 1
    assert "traced" not in out.stderr  # no tree printed
    assert f"saved to {files[0].name}" in out.stderr


def test_tree_is_printed_on_stderr_only(probe_dir: Path) -> None:
    out = _run([*LAUNCHERS[0], "-o", "p.json", "probe.py"], probe_dir)
    # The root is always shown; which callees clear the tree's size limit depends on timing.
    assert "__main__.<module>" in out.stderr and "__main__." not in out.stdout
    assert "\x1b[" not in out.stderr  # not a terminal: no colour
    # not a terminal: names in full, never cut to fit 80 columns (issue #11)
    assert not re.search(r"─ …(?! \d+ more)", out.stderr)


@pytest.mark.parametrize(
    ("code", "status", "stderr_has"),
    [
        ("raise SystemExit(3)", 3, None),
        ("import sys; sys.exit('bye')", 1, "bye"),
        ("def f():\n    raise ValueError('boom')\nf()", 1, "ValueError: boom"),
        # python dies of SIGINT after printing the traceback (-2 seen by a parent; a shell
        # says 130): so does profkit run (it used to exit 130).
        ("raise KeyboardInterrupt", -signal.SIGINT, "KeyboardInterrupt"),
    ],
)
def test_exit_status_and_exceptions_pass_through(
    code: str, status: int, stderr_has: str | None, tmp_path: Path
) -> None:
    (tmp_path / "s.py").write_text(code)
    native = _run([sys.executable, "s.py"], tmp_path)
    out = _run([*LAUNCHERS[0], "-o", "o.json", "s.py"], tmp_path)
    assert out.returncode == status, out.stderr
    assert native.returncode == status
    if stderr_has:
        assert stderr_has in out.stderr
    if "Traceback" in native.stderr:
        # The same traceback as python's: the program's frames only.
        tb = out.stderr[out.stderr.index("Traceback") :].splitlines()
        assert tb[: len(native.stderr.splitlines())] == native.stderr.splitlines()
    assert (tmp_path / "o.json").exists()


@pytest.mark.parametrize(
    ("signum", "status", "stderr_has"),
    # Death by the same signal, as python's (it used to be exit status 143 and 130).
    [(signal.SIGTERM, -signal.SIGTERM, ""), (signal.SIGINT, -signal.SIGINT, "KeyboardInterrupt")],
    ids=["sigterm", "sigint"],
)
def test_signal_saves_the_profile(
    signum: int, status: int, stderr_has: str, tmp_path: Path
) -> None:
    (tmp_path / "slow.py").write_text(
        "import time\ndef wait():\n    print('ready', flush=True)\n    time.sleep(30)\nwait()\n"
    )
    # A child inherits an ignored SIGINT (a shell's background job, nohup'd CI): python
    # would then ignore Ctrl-C too. A handler caught here is reset to the default at exec.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [*LAUNCHERS[0], "-o", "t.json", "slow.py"],
            cwd=tmp_path,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert stderr_has in err
    profile = profile_file.load(tmp_path / "t.json")
    assert any(f.name.endswith(".wait") for f in profile.frames)


@pytest.mark.parametrize("launcher", LAUNCHERS, ids=lambda c: Path(c[0]).name)
def test_sample_mode(launcher: list[str], probe_dir: Path) -> None:
    (probe_dir / "busy.py").write_text(
        "import time\ndef spin():\n    end = time.perf_counter() + 0.3\n"
        "    while time.perf_counter() < end:\n        pass\nspin()\n"
    )
    out = _run(
        [*launcher, "--mode", "sample", "--interval", "1ms", "-o", "s.json", "busy.py"],
        probe_dir,
    )
    assert out.returncode == 0, out.stderr
    profile = profile_file.load(probe_dir / "s.json")
    assert profile.mode == "sample"
    assert any(f.name.endswith(".spin") for f in profile.frames)
    assert "sampled" in out.stderr
    # The launcher's frames under the program (`profkit` script: "profkit.<module>";
    # python -m profkit: a second "__main__.<module>") are not shown.
    (tree,) = [t for t in profile.threads if t.name == "MainThread"]
    (main,) = tree.root.children.values()
    assert profile.frames[main.frame].name == "__main__.<module>"
    assert [profile.frames[c.frame].name for c in main.children.values()] == ["__main__.spin"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.py"], "can't open file 'nope.py'"),
        (["--basetime", "abc", "probe.py"], "--basetime='abc': expected a duration"),
        ([], "no script to run"),
        (
            ["--udp", "nosuchhost.invalid:2222", "probe.py"],
            "--udp nosuchhost.invalid:2222: cannot resolve",
        ),
        (["--stream", "no/such/dir/x.txt", "probe.py"], "--stream no/such/dir/x.txt: No such file"),
    ],
)
def test_usage_errors_are_one_line(args: list[str], message: str, probe_dir: Path) -> None:
    out = _run([*LAUNCHERS[0], *args], probe_dir)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("profkit: error: ")
    assert message in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "module", ["no_such_module_xyz", "no_such_pkg_xyz.sub", "json", "probe.py"]
)
def test_a_module_that_cannot_run_ends_as_python_m_does(module: str, probe_dir: Path) -> None:
    """N13: `profkit run -m nosuchmod` exited 2 where `python -m nosuchmod` exits 1: the
    same status as python, and python's words after profkit's prefix."""
    bare = _run([sys.executable, "-m", module], probe_dir)
    out = _run([*LAUNCHERS[0], "-m", module], probe_dir)
    assert out.returncode == bare.returncode == 1, out.stderr
    said = bare.stderr.strip().split(": ", 1)[1]  # "<python>: No module named ..."
    assert out.stderr == f"profkit: error: {said}\n"


def test_bad_environment_setting_is_reported(probe_dir: Path) -> None:
    env = _env() | {"PROFKIT_UDP": "nowhere"}
    out = subprocess.run(
        [*LAUNCHERS[0], "probe.py"],
        cwd=probe_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "profkit: error: PROFKIT_UDP='nowhere': expected HOST:PORT" in out.stderr


def test_udp_stream_reaches_a_listener(probe_dir: Path) -> None:
    import socket
    import threading

    from profkit.wire import udp as protocol

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.5)
    host, port = sock.getsockname()
    grams: list[protocol.Datagram] = []
    done = threading.Event()

    def receive() -> None:  # read while the program runs, so the kernel buffer never fills
        while True:
            try:
                grams.append(protocol.decode(sock.recv(65536)))
            except TimeoutError:
                if done.is_set():
                    return

    reader = threading.Thread(target=receive)
    reader.start()
    try:
        out = _run(
            [*LAUNCHERS[0], "--udp", f"{host}:{port}", "--no-tree", "-o", "u.json", "probe.py"],
            probe_dir,
        )
    finally:
        done.set()
        reader.join()
        sock.close()
    assert out.returncode == 0, out.stderr
    seqs = [g.seq for g in grams]
    assert seqs and seqs[0] == 0 and seqs == sorted(set(seqs))  # loss is possible, not reordering
    lines = [line for g in grams for line in g.lines]
    assert any(line.strip().startswith("Enter: ") and line.endswith(".work") for line in lines)
    assert any(line.strip().startswith("Leave: ") and ".work, Duration: " in line for line in lines)


def test_stream_to_stderr_with_basetime(probe_dir: Path) -> None:
    out = _run(
        [
            *LAUNCHERS[0],
            "--stream",
            "stderr",
            "--basetime",
            "1s",
            "--no-tree",
            "-o",
            "b.json",
            "probe.py",
        ],
        probe_dir,
    )
    assert out.returncode == 0, out.stderr
    assert "Enter:" not in out.stderr  # nothing lasts a second: no lines, and no orphans
    out = _run(
        [
            *LAUNCHERS[0],
            "--stream",
            "stderr",
            "--prefix",
            "__main__,probe",
            "--no-c-calls",  # Python functions only: what the prefix filters
            "--no-tree",
            "-o",
            "b.json",
            "probe.py",
        ],
        probe_dir,
    )
    events = [line for line in out.stderr.splitlines() if "Enter: " in line or "Leave: " in line]
    assert events and all(
        ".work" in e or ".main" in e or "<module>" in e or "genexpr" in e for e in events
    ), events


def _startup_hook_installed() -> bool:
    import importlib.util
    import site

    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    installed = any((Path(d) / "profkit_startup.pth").exists() for d in dirs)
    return installed and importlib.util.find_spec("profkit.collect.startup") is not None


def _run_activated(cmd: list[str], cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` with the ELT profiler attached by environment activation."""
    env = _env() | {
        "PROFKIT_ENABLE_PROFILING": "1",
        "PROFKIT_PROFILER": "profkit.profilers.elt:EltProfiler",
        **variables,
    }
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


CHILDREN = """\
import multiprocessing as mp, subprocess, sys
def square(x):
    return x * x
def main():
    subprocess.run([sys.executable, "-c", "def kid():\\n    return 1\\nkid()"], check=True)
    for method in ("spawn", "fork"):
        p = mp.get_context(method).Process(target=square, args=(3,))
        p.start()
        p.join()
if __name__ == "__main__":
    main()
"""


@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
def test_subprocesses_write_their_own_profiles(tmp_path: Path) -> None:
    (tmp_path / "parent.py").write_text(CHILDREN)
    flags = ["--basetime", "1ns", "--unit", "ns", "--timeline"]
    out = _run([*LAUNCHERS[0], "--no-tree", *flags, "-o", "par.json", "parent.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    children = sorted(tmp_path.glob("par.*.json"))
    parent = profile_file.load(tmp_path / "par.json").metadata["settings"]
    names = set()
    for child in children:
        profile = profile_file.load(child)
        assert profile.metadata["pid"] == int(child.name.split(".")[1])
        names |= {f.name.rsplit(".", 1)[-1] for f in profile.frames}
        # The parent's exact settings, except where each child writes and that it is quiet.
        settings = profile.metadata["settings"]
        assert (settings["basetime_ns"], settings["unit"], settings["timeline"]) == (
            "1ns",
            "ns",
            "1",
        )
        assert {k: v for k, v in settings.items() if k not in ("output", "tree")} == {
            k: v for k, v in parent.items() if k not in ("output", "tree")
        }
    assert len(children) >= 3, out.stderr
    assert {"kid", "square"} <= names
    assert "child process profile(s)" in out.stderr
    # --no-subprocesses: only the parent's file
    for child in children:
        child.unlink()
    out = _run(
        [*LAUNCHERS[0], "--no-tree", "--no-subprocesses", "-o", "par.json", "parent.py"], tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert not list(tmp_path.glob("par.*.json"))


@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
def test_environment_activation_without_profkit_run(probe_dir: Path) -> None:
    env = _env() | {
        "PROFKIT_ENABLE_PROFILING": "1",
        "PROFKIT_PROFILER": "profkit.profilers.elt:EltProfiler",
        "PROFKIT_OUTPUT": "env.{pid}.json",
        "PROFKIT_NAMESPACE_PREFIX": "__main__,probe",
    }
    native = _run([sys.executable, "probe.py"], probe_dir)
    out = subprocess.run(
        [sys.executable, "probe.py"],
        cwd=probe_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input="in",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == native.stdout
    (saved,) = probe_dir.glob("env.*.json")
    profile = profile_file.load(saved)
    # the prefix filters Python functions (C functions they call have no file and stay)
    names = {f.name for f in profile.frames if f.file}
    assert names and all(n.startswith(("__main__.", "probe.")) for n in names), names
    assert "traced" in out.stderr  # PROFKIT_TREE defaults to on


FORKY = """\
import os
def work():
    return sum(range(10000))
pid = os.fork()
work()
if pid:
    os.waitpid(pid, 0)
print("child" if pid == 0 else "parent")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
def test_forked_child_returning_through_profkit_writes_its_own_clean_profile(
    tmp_path: Path,
) -> None:
    (tmp_path / "forky.py").write_text(FORKY)
    out = _run([*LAUNCHERS[0], "--no-tree", "-o", "f.json", "forky.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == ["child", "parent"]
    assert out.stderr.count("profile saved to f.json") == 1  # the parent's message only
    (child,) = tmp_path.glob("f.*.json")
    for path in (tmp_path / "f.json", child):
        names = [f.name for f in profile_file.load(path).frames]
        assert any(n.endswith(".work") for n in names), names
        assert not any(n.startswith(("threading.", "enum.", "contextlib.")) for n in names), names


def test_module_run_as_main_is_named_after_the_module(probe_dir: Path) -> None:
    out = _run(
        [*LAUNCHERS[0], "--no-tree", "--prefix", "probepkg", "-o", "m.json", "-m", "probepkg"],
        probe_dir,
    )
    assert out.returncode == 0, out.stderr
    # the prefix filters Python functions (C functions they call have no file and stay)
    names = {f.name for f in profile_file.load(probe_dir / "m.json").frames if f.file}
    assert "probepkg.__main__.work" in names, names
    assert all(n.startswith("probepkg.") for n in names), names


@pytest.mark.parametrize("stream", [[], ["--stream", "events.txt"]], ids=["plain", "streaming"])
def test_timeline_has_a_span_per_shown_call(stream: list[str], probe_dir: Path) -> None:
    out = _run(
        [*LAUNCHERS[0], "--timeline", *stream, "--no-tree", "-o", "t.json", "probe.py"], probe_dir
    )
    assert out.returncode == 0, out.stderr
    profile = profile_file.load(probe_dir / "t.json")
    calls = sum(node.calls for thread in profile.threads for _, node in thread.root.walk())
    assert calls > 0 and len(profile.spans) == calls
    assert all(s.end_ns >= s.start_ns >= 0 for s in profile.spans)


def test_output_path_is_fixed_before_the_program_changes_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "cd.py").write_text("import os\nos.chdir('sub')\n")
    out = _run(
        [*LAUNCHERS[0], "--no-tree", "--no-subprocesses", "-o", "here.json", "cd.py"], tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "here.json").exists() and not (tmp_path / "sub" / "here.json").exists()


ASYNC_SCRIPT = """\
import asyncio, threading
async def leaf(i):
    await asyncio.sleep(0)
    return i
async def main():
    return sum(await asyncio.gather(*(leaf(i) for i in range(10))))
def in_thread():
    return sum(range(100))
t = threading.Thread(target=in_thread)
t.start(); t.join()
print(asyncio.run(main()))
"""


def test_a_scripts_code_is_always_named_main(tmp_path: Path) -> None:
    # The collector names a file's code after sys.modules as it was when it first saw it:
    # the script's stem for <module>, __main__ later. profkit run pins it to __main__.
    (tmp_path / "aio.py").write_text(ASYNC_SCRIPT)
    out = _run(
        [*LAUNCHERS[0], "--no-tree", "--prefix", "__main__", "-o", "a.json", "aio.py"], tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "45\n"
    names = {f.name for f in profile_file.load(tmp_path / "a.json").frames}
    assert {"__main__.<module>", "__main__.main", "__main__.leaf", "__main__.in_thread"} <= names
    assert not any(n.startswith("aio.") for n in names), names


@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
def test_environment_activation_saves_where_the_process_started(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    cmd = [sys.executable, "-c", "import os; os.chdir('sub')"]
    out = _run_activated(cmd, tmp_path, PROFKIT_TREE="0", PROFKIT_OUTPUT="env.json")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "env.json").exists() and not list((tmp_path / "sub").iterdir())
    # The start-up hook runs inside site's .pth processing: the rest of site's start-up
    # (user site, sitecustomize) is the interpreter's, not the program's.
    names = {f.name for f in profile_file.load(tmp_path / "env.json").frames}
    assert not any(n.startswith("site.") for n in names), names
    out = _run_activated(cmd, tmp_path, PROFKIT_TREE="0")  # the default name too
    assert out.returncode == 0, out.stderr
    assert list(tmp_path.glob("profkit-c-*.json")) and not list((tmp_path / "sub").iterdir())


@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
def test_environment_activation_honours_profkit_interval(tmp_path: Path) -> None:
    # 0.3 s of wall time sampled every 50 ms: at most ~7 samples. At the default 1 ms the
    # sampler gets the GIL every 5 ms (switch interval) from this busy loop: ~60. No lower
    # bound: a starved machine may not schedule the sampler thread at all.
    code = "import time\ndef spin(end):\n    while time.monotonic() < end: pass\nspin(time.monotonic() + 0.3)\n"
    out = _run_activated(
        [sys.executable, "-c", code],
        tmp_path,
        PROFKIT_PROFILER="profkit.profilers.elt:SamplingProfiler",
        PROFKIT_TREE="0",
        PROFKIT_OUTPUT="s.json",
        PROFKIT_INTERVAL="50ms",
    )
    assert out.returncode == 0, out.stderr
    profile = profile_file.load(tmp_path / "s.json")
    samples = sum(c.calls for t in profile.threads for c in t.root.children.values())
    assert samples <= 20


def test_unwritable_output_keeps_the_programs_status(tmp_path: Path) -> None:
    out = _run(
        [*LAUNCHERS[0], "-o", str(tmp_path / "no" / "dir" / "x.json"), "-c", "raise SystemExit(3)"],
        tmp_path,
    )
    assert out.returncode == 3
    assert out.stderr.count("cannot write profile") == 1
    assert "Traceback" not in out.stderr


def test_stdin_and_binary_stdout_pass_through(tmp_path: Path) -> None:
    code = "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d + bytes(range(256)))"
    out = subprocess.run(
        [*LAUNCHERS[0], "--no-tree", "-o", "b.json", "-c", code],
        cwd=tmp_path,
        env=_env(),
        input=b"\x00\xffhi",
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"\x00\xffhi" + bytes(range(256))


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({"bad.py": "def f(:\n"}, ["bad.py"], "bad.py, line 1: SyntaxError: "),
        ({}, ["-c", "def ("], "-c, line 1: SyntaxError: "),
        ({"nul.py": "x = 1\n\0"}, ["nul.py"], "nul.py: "),
        (
            {"q/__init__.py": "", "q/__main__.py": "def ("},
            ["-m", "q"],
            "__main__.py, line 1: SyntaxError",
        ),
    ],
    ids=["script", "code", "nul", "module-syntax"],
)
def test_a_program_that_cannot_be_compiled_is_one_line(
    files: dict[str, str], args: list[str], message: str, tmp_path: Path
) -> None:
    # These were "profkit: internal error: SyntaxError ..." with status 70.
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    out = _run([*LAUNCHERS[0], *args], tmp_path)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("profkit: error: ") and message in line, line
    assert not list(tmp_path.glob("*.json"))


def test_unwritable_output_is_said_once_even_with_children(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys\n"
        "for _ in range(2): subprocess.run([sys.executable, '-c', 'pass'])\n"
        "sys.exit(4)\n"
    )
    out = _run(
        [*LAUNCHERS[0], "--no-tree", "-o", str(tmp_path / "no" / "x.json"), "-c", code], tmp_path
    )
    assert out.returncode == 4
    assert out.stderr.count("cannot write profile") == 1, out.stderr


def test_output_to_a_directory_uses_the_default_name_inside(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    for target in ["runs", "runs/"]:
        out = _run([*LAUNCHERS[0], "--no-tree", "-o", target, "-c", "pass"], tmp_path)
        assert out.returncode == 0, out.stderr
    assert len(list((tmp_path / "runs").glob("profkit-c-*.json"))) == 2
    out = _run([*LAUNCHERS[0], "--no-tree", "-o", "new/", "-c", "pass"], tmp_path)
    # The program succeeded but its profile is lost: a non-zero exit (issue #11 item 5), and
    # the program's own status is said.
    assert out.returncode == 2
    assert "cannot write profile new/profkit-c-" in out.stderr
    assert "the program exited with status 0" in out.stderr
    assert not (tmp_path / "new").exists()  # was: a file named "new"


def test_children_stream_to_their_own_file(tmp_path: Path) -> None:
    # A child used to reopen the parent's --stream file for writing: truncated, overwritten.
    code = (
        "def parent_before(): pass\n"
        "parent_before()\n"
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'def child_fn(): pass\\nchild_fn()'])\n"
        "def parent_after(): pass\n"
        "parent_after()\n"
    )
    out = _run(
        [*LAUNCHERS[0], "--no-tree", "--stream", "ev.txt", "-o", "p.json", "-c", code], tmp_path
    )
    assert out.returncode == 0, out.stderr
    parent = (tmp_path / "ev.txt").read_text()
    assert "Enter: parent_before" in parent and "Leave: parent_after" in parent
    assert "child_fn" not in parent and "\0" not in parent
    if _startup_hook_installed():
        (child,) = tmp_path.glob("ev.*.txt")
        assert "Enter: child_fn" in child.read_text()


@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
def test_profkit_run_under_environment_activation_saves_only_its_own_profile(
    tmp_path: Path,
) -> None:
    # The start-up hook attaches a profiler to the profkit process itself; `run` replaces
    # it, and it used to save (and print) profkit's own start-up as profkit-c-<pid>.json.
    out = _run_activated([*LAUNCHERS[0], "--no-tree", "-o", "mine.json", "-c", "pass"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json"]
    assert out.stderr.count("profile saved") == 1 and "traced" not in out.stderr


def test_a_prefix_that_matches_nothing_is_pointed_out(probe_dir: Path) -> None:
    out = _run([*LAUNCHERS[0], "--prefix", "probe", "-o", "p.json", "probe.py"], probe_dir)
    assert out.returncode == 0, out.stderr
    assert "no function matched --prefix probe (a script's own code is __main__)" in out.stderr
    out = _run([*LAUNCHERS[0], "--prefix", "__main__", "-o", "p.json", "probe.py"], probe_dir)
    assert "no function matched" not in out.stderr


THREAD_OUTLIVES_MAIN = """\
import sys, threading
go = threading.Event()
def worker():
    go.wait()
    busy()
def busy():
    return sum(range(1000))
threading.Thread(target=worker).start()
try:
    {end}
finally:
    go.set()
"""


@pytest.mark.parametrize(
    ("end", "status"),
    [("raise ValueError('main failed')", 1), ("sys.exit(5)", 5)],
    ids=["exception", "sys.exit"],
)
def test_threads_are_waited_for_however_main_ends(end: str, status: int, tmp_path: Path) -> None:
    # As python does; profiling used to stop as soon as __main__ raised.
    (tmp_path / "t.py").write_text(THREAD_OUTLIVES_MAIN.format(end=end))
    out = _run([*LAUNCHERS[0], "--no-tree", "-o", "t.json", "t.py"], tmp_path)
    assert out.returncode == status, out.stderr
    names = {f.name for f in profile_file.load(tmp_path / "t.json").frames}
    assert "__main__.busy" in names, names


@pytest.mark.parametrize("shebang", [None, "/usr/bin/env python3"])
def test_zip_and_directory_apps_run_as_with_python(shebang: str | None, tmp_path: Path) -> None:
    """A zip app (with or without a shebang prefix) or a directory with __main__.py."""
    import zipapp

    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text("import sys\nprint('app', sys.argv[1:])\n")
    pyz = tmp_path / "app.pyz"
    zipapp.create_archive(app, pyz, interpreter=shebang)
    for target in (pyz, app):
        bare = _run([sys.executable, str(target), "x"], tmp_path)
        out = tmp_path / f"{target.name}.json"
        under = _run(
            [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(target), "x"],
            tmp_path,
        )
        assert under.returncode == bare.returncode == 0, under.stderr
        assert under.stdout == bare.stdout == "app ['x']\n"
        assert out.exists()
