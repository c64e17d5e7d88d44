"""The CoreCLR profiler on real C# programs, judged by the programs' own call counters.

``programs/Workload.cs`` counts every call it makes and prints the counts; each test runs
one mode of it under the profiler and compares the profile (or the event lines) with
those counts, in the same run.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file
from profkit.calltree.model import CallNode, CallProfile
from profkit.clr import run_dotnet
from profkit.clr.host import Host
from profkit.clr.launch import DotnetOutcome
from profkit.settings import Settings
from tests.clr.conftest import profkit_cli

P = "ProfTest.Program."


def counters(stdout: str) -> dict[str, int]:
    line = [x for x in stdout.splitlines() if x.startswith("Fib=")][-1]
    return {k: int(v) for k, v in (part.split("=") for part in line.split())}


def walk(profile: CallProfile) -> Iterator[tuple[str, CallNode, list[str]]]:
    """(frame name, node, names of its ancestors) for every node of every thread."""
    for thread in profile.threads:
        stack: list[tuple[CallNode, list[str]]] = [(thread.root, [])]
        while stack:
            node, path = stack.pop()
            for child in node.children.values():
                name = profile.frames[child.frame].name
                yield name, child, path
                stack.append((child, [*path, name]))


def calls(profile: CallProfile, name: str) -> int:
    return sum(node.calls for n, node, _ in walk(profile) if n == name)


def run_captured(
    workload: Path, *args: str, env: dict[str, str] | None = None, **settings: object
) -> tuple[DotnetOutcome, str, str]:
    s = Settings(prefixes=("ProfTest",)).replace(**settings)
    with (
        open(os.devnull, "rb") as devnull,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        outcome = run_dotnet(
            str(workload), args, settings=s, stdin=devnull, stdout=out, stderr=err, environ=env
        )
        out.seek(0)
        err.seek(0)
        return outcome, out.read().decode(), err.read().decode()


def test_exact_call_counts_recursion_loops_nested_and_generic_types(workload: Path) -> None:
    outcome, out, _ = run_captured(workload, "calls")
    assert outcome.status == 0 and outcome.profile is not None
    expected = counters(out)
    profile = outcome.profile
    assert calls(profile, P + "Fib") == expected["Fib"] == 1973
    assert calls(profile, P + "Leaf") == expected["Leaf"] == 1000
    assert calls(profile, "ProfTest.Outer+Inner.Work") == expected["Inner"] == 10
    assert calls(profile, "ProfTest.Box`1.Get") == expected["Generic"] == 8
    assert calls(profile, "ProfTest.Box`1.Convert``1") == expected["Convert"] == 2
    assert calls(profile, P + "Main") == 1
    # recursion is a chain: Fib(15) nests 15 deep under Main
    depths = [len(path) for name, _, path in walk(profile) if name == P + "Fib"]
    assert max(depths) == 15
    assert outcome.result is not None and outcome.result.lost == 0


def test_exceptions_unwind_frames_through_finally(workload: Path) -> None:
    outcome, out, _ = run_captured(workload, "exceptions")
    expected = counters(out)
    profile = outcome.profile
    assert profile is not None
    assert calls(profile, P + "Thrower") == expected["Thrower"] == 20
    assert calls(profile, P + "Cleanup") == expected["Cleanup"] == 15
    # the finally runs inside the frame being unwound; the catch runs back in Main
    for name, node, path in walk(profile):
        if name == P + "Cleanup":
            assert path[-1] == P + "Thrower"
        if name == P + "Leaf":
            assert path == [P + "Main"] and node.calls == 5
    counts = profile.metadata["clr_event_counts"]
    assert counts["exception"] == 5
    assert counts["catch"] == 5
    assert outcome.result is not None and outcome.result.resyncs == 0


def test_several_threads_each_get_their_named_tree(workload: Path) -> None:
    outcome, out, _ = run_captured(workload, "threads")
    assert counters(out)["Worker"] == 4
    profile = outcome.profile
    assert profile is not None
    workers = {t.name: t for t in profile.threads if t.name.startswith("worker-")}
    assert sorted(workers) == ["worker-0", "worker-1", "worker-2", "worker-3"]
    for thread in workers.values():
        (worker,) = thread.root.children.values()
        assert profile.frames[worker.frame].name == P + "Worker" and worker.calls == 1
        (leaf,) = worker.children.values()
        assert profile.frames[leaf.frame].name == P + "Leaf" and leaf.calls == 100
    assert calls(profile, P + "Leaf") == 400


def test_tail_recursive_method_counted_exactly(workload: Path) -> None:
    outcome, out, _ = run_captured(workload, "tail")
    profile = outcome.profile
    assert profile is not None
    assert calls(profile, P + "TailSum") == counters(out)["Tail"] == 1001


@pytest.mark.parametrize("hooks", ["fast", "info"])
def test_real_tail_calls_keep_the_depth_and_the_counts(workload: Path, hooks: str) -> None:
    """IL tail calls (emitted at run time): each Tailcall closes its frame, the callee
    opens at the same depth, so Down and Other alternate directly under their caller."""
    env = dict(os.environ, PROFKIT_CLR_HOOKS=hooks)
    outcome, out, _ = run_captured(workload, "tailemit", "100", env=env)
    assert "Emitted=7" in out
    profile = outcome.profile
    assert profile is not None
    assert calls(profile, "ProfTest.Emitted.Down") == 101
    assert calls(profile, "ProfTest.Emitted.Other") == 100
    for name, _, path in walk(profile):
        if name.startswith("ProfTest.Emitted."):
            assert path == [P + "Main", P + "EmittedTailCalls"], (name, path)
    assert outcome.result is not None and outcome.result.resyncs == 0


def test_gc_loads_threads_and_code_map_are_recorded(workload: Path) -> None:
    outcome, out, _ = run_captured(workload, "gc")
    profile = outcome.profile
    assert profile is not None and outcome.result is not None
    assert calls(profile, P + "Leaf") == counters(out)["Leaf"] == 1000
    events = profile.metadata["clr_events"]
    induced = [e[3] for e in events if e[2] == "gc-start" and "induced" in e[3]]
    assert induced == ["2 induced loh"]  # GC.Collect(): every generation and the LOH
    assert profile.metadata["clr_event_counts"]["gc-end"] >= 1
    assert any(e[2] == "assembly" and e[3] == "Workload" for e in events)
    assert str(workload) in profile.metadata["modules"]
    assert profile.metadata["clr_event_counts"]["thread-created"] >= 1
    jitted = {c.name for c in outcome.result.code if c.kind == "jit"}
    assert {P + "Main", P + "Leaf"} <= jitted


def test_timeline_keeps_every_shown_call(workload: Path, tmp_path: Path) -> None:
    from profkit.export import registry

    outcome, out, _ = run_captured(workload, "calls", timeline=True)
    profile = outcome.profile
    assert profile is not None
    frames = [profile.frames[s.frame].name for s in profile.spans]
    assert frames.count(P + "Fib") == counters(out)["Fib"]
    assert frames.count(P + "Leaf") == counters(out)["Leaf"]
    main = [s for s in profile.spans if profile.frames[s.frame].name == P + "Main"]
    assert len(main) == 1 and main[0].depth == 0
    for span in profile.spans:  # every call inside Main's span
        assert main[0].start_ns <= span.start_ns <= span.end_ns <= main[0].end_ns
    registry.export(profile, "chrome", tmp_path / "trace.json")
    assert (tmp_path / "trace.json").stat().st_size > 0


def test_prefix_filter_keeps_only_matching_methods(workload: Path) -> None:
    outcome, out, _ = run_captured(workload, "calls", prefixes=("ProfTest.Outer",))
    profile = outcome.profile
    assert profile is not None
    names = {name for name, _, _ in walk(profile)}
    assert names == {"ProfTest.Outer+Inner.Work", "ProfTest.Outer+Inner..ctor"}
    assert calls(profile, "ProfTest.Outer+Inner.Work") == counters(out)["Inner"]


def _check_no_orphans(lines: list[str]) -> None:
    """Every Leave line closes an Enter line at the same indentation, in order."""
    open_: list[str] = []
    for line in lines:
        indent = (len(line) - len(line.lstrip(" "))) // 4
        text = line.strip()
        if text.startswith("Enter: "):
            assert indent == len(open_), line
            open_.append(text[len("Enter: ") :])
        else:
            m = re.match(r"Leave: (.*), Duration: [0-9.]+ (us|ns)$", text)
            assert m, line
            assert indent == len(open_) - 1 and open_[-1] == m.group(1), line
            open_.pop()


def test_base_time_hides_short_calls_without_orphan_lines(workload: Path, tmp_path: Path) -> None:
    stream = tmp_path / "lines.txt"
    outcome, out, _ = run_captured(workload, "slow", basetime_ns=10_000_000, stream=str(stream))
    profile = outcome.profile
    assert profile is not None
    assert counters(out)["Slow"] == 3 and counters(out)["Fast"] == 8
    assert calls(profile, P + "Slow") == 3
    assert calls(profile, P + "Fast") == 0  # every Fast call is far below 10 ms
    lines = stream.read_text().splitlines()
    assert [x for x in lines if "Fast" in x] == []
    assert sum(1 for x in lines if x.strip().startswith("Leave: " + P + "Slow")) == 3
    assert lines[0] == "Enter: " + P + "Main"
    _check_no_orphans(lines)


def test_stream_lines_match_the_article(workload: Path, tmp_path: Path) -> None:
    stream = tmp_path / "lines.txt"
    run_captured(workload, "exceptions", stream=str(stream), unit="ns")
    lines = stream.read_text().splitlines()
    _check_no_orphans(lines)
    assert lines[1] == "    Enter: " + P + "Thrower"
    assert lines[2] == "        Enter: " + P + "Thrower"
    assert sum(1 for x in lines if x.lstrip().startswith("Enter: " + P + "Thrower")) == 20
    assert all(x.endswith(" ns") for x in lines if "Leave" in x)


def test_udp_datagrams_reach_the_monitor(workload: Path) -> None:
    from profkit.monitor.core import Monitor

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    try:
        outcome, _, _ = run_captured(workload, "calls", udp=sock.getsockname())
        monitor = Monitor()
        bodies: list[str] = []
        sock.settimeout(0.5)
        while True:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            shown = monitor.feed(data)
            assert shown is not None
            bodies.append(shown[1])
    finally:
        sock.close()
    assert monitor.malformed == 0
    totals = monitor.totals()
    assert totals.lost == 0 and totals.dropped == 0
    lines = "\n".join(bodies).split("\n")
    _check_no_orphans(lines)
    assert sum(1 for x in lines if x.lstrip().startswith("Leave: " + P + "Fib,")) == 1973
    assert outcome.result is not None and outcome.result.udp_dropped == 0
    top = {row[0] for row in monitor.functions.top(50)}
    assert P + "Fib" in top


def test_cli_run_keeps_stdout_and_exit_status(
    workload: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    out = tmp_path / "p.json"
    bare = subprocess.run(
        [str(dotnet_host.path), str(workload), "exit", "7"],
        capture_output=True, text=True,
    )  # fmt: skip
    proc = subprocess.run(
        [*profkit_cli(), "clr", "run", "--prefix", "ProfTest", "-o", str(out), "--no-tree",
         str(workload), "exit", "7"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == bare.returncode == 7
    assert proc.stdout == bare.stdout
    assert "profile saved" in proc.stderr
    assert calls(profile_file.load(str(out)), P + "Leaf") == 1


def test_stdin_and_stdout_pass_through(workload: Path, tmp_path: Path, dotnet_host: Host) -> None:
    data = "first line\nsecond: ünïcode\n" * 100
    bare = subprocess.run(
        [dotnet_host.path, str(workload), "echo"], input=data, capture_output=True, text=True
    )
    proc = subprocess.run(
        [*profkit_cli(), "clr", "run", "--prefix", "ProfTest", "-o", str(tmp_path / "p.json"),
         "--no-tree", str(workload), "echo"],
        input=data, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == bare.returncode == 0
    assert proc.stdout == bare.stdout == data


def test_uncaught_exception_keeps_status_and_saves_the_profile(
    workload: Path, tmp_path: Path, dotnet_host: Host
) -> None:
    out = tmp_path / "p.json"
    host = dotnet_host.path
    bare = subprocess.run([host, str(workload), "throw"], capture_output=True, text=True)
    proc = subprocess.run(
        [*profkit_cli(), "clr", "run", "--prefix", "ProfTest", "-o", str(out), "--no-tree",
         str(workload), "throw"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bare.returncode != 0
    assert proc.returncode == bare.returncode  # both die of SIGABRT (a shell sees 134)
    assert proc.stdout == bare.stdout
    assert "Unhandled exception" in proc.stderr and "InvalidOperationException" in proc.stderr
    profile = profile_file.load(str(out))
    assert calls(profile, P + "Leaf") == 1


def test_bad_setting_reported_once_and_program_runs_unprofiled(
    workload: Path, dotnet_host: Host
) -> None:
    from profkit.clr.environment import profiler_environment

    env = dict(os.environ) | profiler_environment(Settings())
    env["PROFKIT_BASETIME"] = "abc"
    host = dotnet_host.path
    proc = subprocess.run(
        [host, str(workload), "exit", "3"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 3
    assert counters(proc.stdout)["Leaf"] == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "PROFKIT_BASETIME='abc'" in lines[0] and "unprofiled" in lines[0]


def test_clr_env_from_a_shell_with_the_articles_variables(
    workload: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    host = dotnet_host.path
    raw = tmp_path / "raw-{pid}.txt"
    cli = " ".join(profkit_cli())
    script = (
        f'eval "$({cli} clr env --raw {raw})" && '
        f"NAMESPACE_PREFIX=ProfTest.Outer PROFILE_BASETIME=0 {host} {workload} calls"
    )
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    expected = counters(proc.stdout)
    lines = proc.stderr.splitlines()
    assert lines.count("Enter: ProfTest.Outer+Inner.Work") == expected["Inner"] == 10
    _check_no_orphans(lines)
    (written,) = tmp_path.glob("raw-*.txt")
    out = tmp_path / "p.json"
    convert = subprocess.run(
        [*profkit_cli(), "clr", "convert", str(written), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert convert.returncode == 0, convert.stderr
    assert calls(profile_file.load(str(out)), "ProfTest.Outer+Inner.Work") == 10


def test_every_export_opens_a_dotnet_profile(workload: Path, tmp_path: Path) -> None:
    from profkit.export import registry

    outcome, _, _ = run_captured(workload, "calls")
    assert outcome.profile is not None
    saved = tmp_path / "p.json"
    profile_file.save(outcome.profile, str(saved))
    for name in registry.names():
        proc = subprocess.run(
            [*profkit_cli(), "export", str(saved), "-F", name, "-o", str(tmp_path / f"out.{name}")],
            capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 0, (name, proc.stderr)
    report = subprocess.run([*profkit_cli(), "report", str(saved)], capture_output=True, text=True)
    assert report.returncode == 0 and P + "Main" in report.stdout


def test_perf_map_lists_jit_and_precompiled_code(workload: Path, tmp_path: Path) -> None:
    from profkit.formats.perfmap.perfpid import load_perf_map

    outcome = run_dotnet(
        str(workload),
        ["calls"],
        perf_map=str(tmp_path / "perf-{pid}.map"),
        events=("jit", "loads"),
        stdout=subprocess.DEVNULL,
    )
    assert outcome.perf_map is not None
    entries = list(load_perf_map(outcome.perf_map).entries())
    names = [e.name for e in entries]
    assert P + "Main" in names  # JIT'd
    assert any(n.endswith(" [r2r]") and n.startswith("System.") for n in names)  # precompiled
    starts = [e.start for e in entries]
    assert starts == sorted(starts)


def test_withinfo_hooks_give_the_same_counts(workload: Path) -> None:
    """PROFKIT_CLR_HOOKS=info: the runtime's register-saving stubs call C hooks (the
    article's SetEnterLeaveFunctionHooks3WithInfo), instead of profkit's assembly stubs."""
    env = dict(os.environ, PROFKIT_CLR_HOOKS="info")
    outcome, out, _ = run_captured(workload, "exceptions", env=env)
    profile = outcome.profile
    assert profile is not None
    expected = counters(out)
    assert calls(profile, P + "Thrower") == expected["Thrower"]
    assert calls(profile, P + "Cleanup") == expected["Cleanup"]
    assert calls(profile, P + "Leaf") == expected["Leaf"]


def test_profkit_run_takes_an_assembly(workload: Path, tmp_path: Path) -> None:
    """``profkit run app.dll``: the runner's choice table sends it to the .NET engine."""
    out = tmp_path / "p.json"
    proc = subprocess.run(
        [*profkit_cli(), "run", "--prefix", "ProfTest", "-o", str(out), "--no-tree",
         str(workload), "exit", "5"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 5, proc.stderr
    assert counters(proc.stdout)["Leaf"] == 1
    profile = profile_file.load(str(out))
    assert calls(profile, P + "Leaf") == 1
    assert profile.metadata["runtime"] == "CoreCLR"


def test_profkit_run_refuses_what_dotnet_cannot_do(workload: Path, tmp_path: Path) -> None:
    # (--mode sample and --mode memory run .NET through EventPipe: tests/dotnet)
    script = tmp_path / "x.py"
    script.write_text("print(1)\n")
    flag = subprocess.run(
        [*profkit_cli(), "run", "--dotnet", "/bin/true", str(script)],
        capture_output=True,
        text=True,
    )
    assert flag.returncode == 2 and "for .NET assemblies" in flag.stderr
    same = subprocess.run(
        [*profkit_cli(), "run", "-o", str(workload), str(workload)], capture_output=True, text=True
    )
    assert same.returncode == 2 and "inputs are never modified" in same.stderr


def test_sink_that_cannot_open_is_one_line_and_the_program_runs(
    workload: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    from profkit.clr.environment import profiler_environment

    env = dict(os.environ) | profiler_environment(Settings())
    env["PROFKIT_STREAM"] = str(tmp_path / "no" / "such" / "dir" / "lines.txt")
    proc = subprocess.run(
        [dotnet_host.path, str(workload), "exit", "4"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 4
    assert counters(proc.stdout)["Leaf"] == 1
    (line,) = proc.stderr.splitlines()
    assert "PROFKIT_STREAM=" in line and "No such file" in line and "unprofiled" in line


def test_a_full_buffer_loses_events_counted_never_silently(workload: Path, tmp_path: Path) -> None:
    """A tiny per-thread buffer and a slow sink: events may be lost; if so they are counted,
    said, and no call is over-counted; if not, the counts are exact."""
    env = dict(os.environ, PROFKIT_CLR_BUFFER="1024")
    outcome, out, _ = run_captured(
        workload, "calls", env=env, stream=str(tmp_path / "lines.txt"), unit="ns"
    )
    profile = outcome.profile
    assert profile is not None and outcome.result is not None
    expected = counters(out)
    fib, leaf = calls(profile, P + "Fib"), calls(profile, P + "Leaf")
    if outcome.result.lost:
        assert profile.metadata["events_lost"] == outcome.result.lost
        assert any("events were lost" in n for n in outcome.notes)
        assert fib <= expected["Fib"] and leaf <= expected["Leaf"]
    else:
        assert (fib, leaf) == (expected["Fib"], expected["Leaf"])


def test_r2r_code_map_matches_the_images_method_tables(workload: Path) -> None:
    """Oracle: the ReadyToRun code the runtime reported (JITCachedFunctionSearchFinished +
    GetCodeInfo2, as start - module base) is, range for range, a method body of the image
    as profkit.formats.r2r reads it from the file: same RVA, same size, same method."""
    from profkit.clr.convert import r2r_rvas
    from profkit.formats.r2r import load_r2r_image

    outcome = run_dotnet(
        str(workload), ["calls"], events=("jit", "loads"), stdout=subprocess.DEVNULL
    )
    assert outcome.result is not None
    ranges = r2r_rvas(outcome.result)
    assert len(ranges) > 100
    by_image: dict[str, list[tuple[int, int, str]]] = {}
    for path, rva, size, name in ranges:
        by_image.setdefault(path, []).append((rva, size, name))
    assert any(p.endswith("System.Private.CoreLib.dll") for p in by_image)
    named = 0
    for path, items in by_image.items():
        bodies: dict[int, tuple[int, str]] = {}
        for body in load_r2r_image(path).methods():
            bodies[body.rva] = (body.length, body.name)
            bodies.update((rva, (length, body.name)) for rva, length in body.cold)
        for rva, size, name in items:
            assert bodies.get(rva, (None,))[0] == size, (path, hex(rva), size, name)
            named += re.sub(r"``\d+$", "", name) in _plain(bodies[rva][1])
    assert named == len(ranges)


def _plain(crossgen_name: str) -> str:
    """crossgen2's ``Ret Ns.Type`1[System.__Canon]::Method(args)`` without instantiations,
    ``::`` as ``.``: ours (from metadata) is ``Ns.Type`1.Method`` (+ ````N`` if generic)."""
    out, depth = [], 0
    for ch in crossgen_name:
        depth += ch == "["
        if depth == 0:
            out.append(ch)
        depth -= ch == "]"
    return "".join(out).replace("::", ".")


def test_profkit_run_perf_map(workload: Path, tmp_path: Path) -> None:
    from profkit.formats.perfmap.perfpid import load_perf_map

    proc = subprocess.run(
        [*profkit_cli(), "run", "--perf-map", str(tmp_path / "perf-{pid}.map"), "--no-tree",
         "-o", str(tmp_path / "p.json"), str(workload), "calls"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (written,) = tmp_path.glob("perf-*.map")
    assert f"perf map saved to {written}" in proc.stderr
    names = [e.name for e in load_perf_map(str(written)).entries()]
    assert P + "Main" in names and any(n.endswith(" [r2r]") for n in names)


def test_sigterm_to_profkit_reaches_the_program_and_the_profile_is_saved(
    workload: Path, tmp_path: Path, dotnet_host: Host
) -> None:
    def run_and_terminate(cmd: list[str]) -> tuple[int, str]:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "sleeping\n"  # the program is running its loop
        time.sleep(0.5)  # ~15 calls of Slow (30 ms each) complete
        proc.terminate()
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err

    bare, _ = run_and_terminate([dotnet_host.path, str(workload), "sleep", "1000"])
    out = tmp_path / "p.json"
    status, err = run_and_terminate(
        [*profkit_cli(), "clr", "run", "--prefix", "ProfTest", "--no-tree", "-o", str(out),
         str(workload), "sleep", "1000"]
    )  # fmt: skip
    assert status == bare  # CoreCLR 3.1 exits 143 after SIGTERM; profkit passes it on
    assert "profile saved" in err
    profile = profile_file.load(str(out))
    assert calls(profile, P + "Slow") >= 1 and profile.metadata["exit_status"] == 143
