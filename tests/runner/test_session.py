"""``profkit run`` end to end: what it refuses, what it survives (issue #17 items 3, 5, 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file

RUN = [sys.executable, "-m", "profkit", "run", "--no-tree"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env | extra


def _run(cmd: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, env=_env(**extra), capture_output=True, text=True, timeout=120
    )


def _startup_hook_installed() -> bool:
    import importlib.util
    import site

    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    installed = any((Path(d) / "profkit_startup.pth").exists() for d in dirs)
    return installed and importlib.util.find_spec("profkit.collect.startup") is not None


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "app.py", "app.py"],
        ["-o", "./app.py", "app.py"],
        ["-o", "link.py", "app.py"],
        ["--stream", "app.py", "app.py"],
        ["-o", "pkg/__main__.py", "-m", "pkg"],
    ],
    ids=["same", "dot-slash", "symlink", "stream", "module-file"],
)
def test_an_output_that_is_the_program_is_refused(args: list[str], tmp_path: Path) -> None:
    source = "print('hello')\n"
    (tmp_path / "app.py").write_text(source)
    (tmp_path / "link.py").symlink_to("app.py")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text(source)
    out = _run([*RUN, *args], tmp_path)
    assert out.returncode == 2
    assert out.stdout == ""  # refused before the program ran
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("profkit: error: ") and "program" in lines[0]
    assert (tmp_path / "app.py").read_text() == source
    assert (tmp_path / "pkg" / "__main__.py").read_text() == source


def test_stream_and_output_cannot_be_one_file(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("pass\n")
    out = _run([*RUN, "-o", "x.json", "--stream", "x.json", "app.py"], tmp_path)
    assert out.returncode == 2 and "same file" in out.stderr


@pytest.mark.parametrize("mode", ["trace", "sample"])
@pytest.mark.parametrize("limit", [20, 30, 50])
def test_a_low_recursion_limit_does_not_lose_the_profile(
    mode: str, limit: int, tmp_path: Path
) -> None:
    (tmp_path / "rec.py").write_text(
        "import sys\n"
        f"sys.setrecursionlimit({limit})\n"
        "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\n"
        "print(f(5), sys.getrecursionlimit())\n"
    )
    bare = _run([sys.executable, "rec.py"], tmp_path)
    out = _run([*RUN[:-1], "--mode", mode, "-o", "r.json", "rec.py"], tmp_path)
    assert out.returncode == bare.returncode == 0, out.stderr
    assert out.stdout == bare.stdout
    assert "RecursionError" not in out.stderr
    profile = profile_file.load(tmp_path / "r.json")
    if mode == "trace":
        assert any(f.name == "__main__.f" for f in profile.frames)


BAD_PROFILERS = """\
from profkit.api import EventMask, ProfilerCallback

class Interrupting(ProfilerCallback):
    def __init__(self):
        raise KeyboardInterrupt

class Exiting(ProfilerCallback):
    def initialize(self, info):
        raise SystemExit(7)

class Odd(BaseException):
    pass

class RaisesOdd(ProfilerCallback):
    def initialize(self, info):
        raise Odd("odd")
"""


@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
@pytest.mark.parametrize(
    ("name", "said", "why"),
    [
        ("Interrupting", "cannot attach profiler", "KeyboardInterrupt"),
        ("Exiting", "profiler pk_bad_profilers.Exiting failed in initialize", "SystemExit: 7"),
        ("RaisesOdd", "profiler pk_bad_profilers.RaisesOdd failed in initialize", "Odd"),
    ],
)
def test_the_start_up_hook_contains_base_exceptions(
    name: str, said: str, why: str, tmp_path: Path
) -> None:
    """A profiler raising SystemExit/KeyboardInterrupt/any BaseException while it is built or
    attached used to kill every process: "Fatal Python error: init_import_site". Built: it
    cannot attach; initialize raised: it failed there, as with any other exception."""
    (tmp_path / "pk_bad_profilers.py").write_text(BAD_PROFILERS)
    out = _run(
        [sys.executable, "-c", "print('ran'); raise SystemExit(3)"],
        tmp_path,
        PROFKIT_ENABLE_PROFILING="1",
        PROFKIT_PROFILER=f"pk_bad_profilers:{name}",
        PYTHONPATH=str(tmp_path),
    )
    assert out.returncode == 3, out.stderr
    assert out.stdout == "ran\n"
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"profkit: {said}"), lines
    assert why in lines[0] and "Fatal" not in out.stderr


STACK = """\
import inspect, json
print(json.dumps([(f.function, f.frame.f_globals.get("__name__")) for f in inspect.stack()]))
"""


@pytest.mark.parametrize(
    "launcher",
    [[sys.executable, "-m", "profkit"], [str(Path(sys.executable).parent / "profkit")]],
    ids=["python-m", "console-script"],
)
def test_the_program_sees_few_profkit_frames(launcher: list[str], tmp_path: Path) -> None:
    """``inspect.stack()`` at a script's top level is 1 frame under python; under profkit
    run it was 11-13 (the runner's own frames). The code now runs in the CLI handler's
    frame: what remains is that handler and profkit's launcher (console script or
    ``python -m``: cli.main's three frames, the entry module, runpy's two)."""
    if not Path(launcher[0]).exists():
        pytest.skip("no profkit console script installed")
    (tmp_path / "stack.py").write_text(STACK)
    import json

    bare = json.loads(_run([sys.executable, "stack.py"], tmp_path).stdout)
    out = _run([*launcher, "run", "--no-tree", "-o", "s.json", "stack.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    frames = json.loads(out.stdout)
    assert frames[: len(bare)] == bare == [["<module>", "__main__"]]
    below = frames[len(bare) :]
    assert not any(str(module).startswith("profkit.runner") for _, module in below), below
    assert below[0] == ["_handler", "profkit.cli.run"]
    assert len(below) <= (5 if "-m" not in launcher else 7), below


@pytest.mark.parametrize("target", [["work.py"], ["-c", "def work(): pass\nwork()"]])
def test_a_trace_profile_holds_the_programs_frames_only(tmp_path: Path, target: list[str]) -> None:
    """profkit's own work after the program (an import in the engine's end) was recorded:
    importlib's _handle_fromlist, with hasattr and isinstance under it, in every profile."""
    (tmp_path / "work.py").write_text("def work(): pass\nwork()\n")
    out = _run([*RUN, "-o", "p.json", *target], tmp_path)
    assert out.returncode == 0, out.stderr
    profile = profile_file.load(tmp_path / "p.json")
    names = {f.name.removeprefix("__main__.") for f in profile.frames}
    assert names == {"<module>", "work"}


def test_an_unwritable_output_keeps_the_programs_exit_message(tmp_path: Path) -> None:
    out = _run(
        [*RUN, "-o", str(tmp_path / "no" / "x.json"), "-c", "raise SystemExit('bye')"], tmp_path
    )
    assert out.returncode == 1
    assert "bye" in out.stderr.splitlines()
    assert "cannot write profile" in out.stderr and "exited with status 1" in out.stderr


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root (lchown)")
def test_stream_is_not_written_through_a_planted_symlink(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (shared / "events.txt").symlink_to(victim)
    os.lchown(shared / "events.txt", 4242, 4242)
    out = _run([*RUN, "--stream", str(shared / "events.txt"), "-c", "pass"], tmp_path)
    assert out.returncode == 2 and "protected_symlinks" in out.stderr
    assert victim.read_text() == "precious"


SWAP_AFTER_THE_CHECK = """\
import os, sys
from profkit.cli.main import main
from profkit.runner import session

victim = sys.argv.pop(1)
checked = session.refuse_overwrite

def then_swap(path, stream, inputs):
    checked(path, stream, inputs)
    os.rename(stream, stream + ".checked")
    os.symlink(victim, stream)  # before the profiler's sink opens the stream

session.refuse_overwrite = then_swap
sys.exit(main(sys.argv[1:]))
"""


def test_stream_is_not_written_through_a_symlink_swapped_in_after_the_check(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "driver.py").write_text(SWAP_AFTER_THE_CHECK)
    code = "def work(): pass\nwork()"
    cmd = [sys.executable, "driver.py", str(victim), "run", "--no-tree", "--stream", "ev.txt"]
    out = _run([*cmd, "-o", "p.json", "-c", code], tmp_path)
    assert out.returncode == 0, out.stderr
    assert victim.read_text() == "precious"
    assert "Enter: work" in (tmp_path / "ev.txt.checked").read_text()


CALLBACK_RAISES = """\
from profkit.api import EventMask, ProfilerCallback

class EnterRaises(ProfilerCallback):
    def initialize(self, info):
        info.set_event_mask(EventMask.ENTER_LEAVE)

    def function_enter(self, function_id):
        raise KeyboardInterrupt
"""


@pytest.mark.skipif(
    not _startup_hook_installed(), reason="profkit's start-up .pth is not installed"
)
def test_a_callback_raising_a_base_exception_during_start_up_is_contained(
    tmp_path: Path,
) -> None:
    (tmp_path / "pk_cb_raises.py").write_text(CALLBACK_RAISES)
    out = _run(
        [sys.executable, "-c", "print('ran')"],
        tmp_path,
        PROFKIT_ENABLE_PROFILING="1",
        PROFKIT_PROFILER="pk_cb_raises:EnterRaises",
        PYTHONPATH=str(tmp_path),
    )
    assert "Fatal Python error" not in out.stderr
    assert out.returncode == 0 and out.stdout == "ran\n"


def test_a_misspelt_setting_is_named_with_its_control_bytes_escaped(tmp_path: Path) -> None:
    out = _run([*RUN, "-o", "m.json", "-c", "pass"], tmp_path, **{"PROFKIT_BASETIM\x1bE": "1"})
    assert out.returncode == 0, out.stderr
    note = [line for line in out.stderr.splitlines() if "is not a profkit setting" in line]
    assert len(note) == 1 and "\x1b" not in note[0], out.stderr
