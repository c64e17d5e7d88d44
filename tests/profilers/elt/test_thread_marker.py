"""The live stream's thread markers (issue #25 item 12): two threads' event lines no
longer interleave at one indentation with nothing saying whose they are."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from pathlib import Path

from profkit.monitor.core import Monitor
from profkit.profilers.elt.sinks import LineFlusher, thread_marker
from profkit.wire import udp as protocol


class _Keep:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_lines(self, lines: list[str]) -> None:
        self.lines += lines

    def close(self) -> None:
        pass


def _owners(lines: list[str], first: int) -> list[tuple[int, str]]:
    """(thread id, line) for every event line, by the markers before it."""
    owner, out = first, []
    for line in lines:
        if line.startswith(protocol.THREAD_MARKER):
            owner = int(line[len(protocol.THREAD_MARKER) :].split()[0])
        else:
            out.append((owner, line))
    return out


def test_one_thread_streams_as_before() -> None:
    keep = _Keep()
    flusher = LineFlusher([keep])
    for i in range(5):
        flusher.append(f"Enter: f{i}")
    flusher.close()
    assert keep.lines == [f"Enter: f{i}" for i in range(5)]


def test_every_line_is_under_its_own_threads_marker() -> None:
    """Two threads write at once (no timing assumed: whatever the interleaving, each line
    must sit under the marker of the thread that wrote it)."""
    keep = _Keep()
    flusher = LineFlusher([keep], max_queued=100_000)
    ids: dict[str, int] = {}
    start = threading.Barrier(2)

    def produce(tag: str) -> None:
        ids[tag] = threading.get_native_id()
        start.wait()
        for i in range(3000):
            flusher.append(f"{tag} {i}")
            if i % 500 == 0:
                flusher.flush()  # drains from the producers' threads too

    threads = [threading.Thread(target=produce, args=(t,), name=f"w{t}") for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flusher.close()
    first = ids[keep.lines[0].split()[0]]
    owned = _owners(keep.lines, first)
    assert len(owned) == 6000
    assert all(ids[line.split()[0]] == tid for tid, line in owned)
    markers = [line for line in keep.lines if line.startswith("Thread: ")]
    assert set(markers) <= {f"Thread: {ids['a']} wa", f"Thread: {ids['b']} wb"}
    assert all(a != b for a, b in itertools.pairwise(markers))  # only at changes


def test_marker_names_are_one_line() -> None:
    assert thread_marker(7, "odd\nname\t x") == "Thread: 7 odd name x"
    assert thread_marker(7, "") == "Thread: 7"


def test_each_datagram_says_whose_lines_it_starts_with() -> None:
    lines = ["Enter: main", "Thread: 9 wk"] + [
        f"    Leave: f{i}, Duration: 1 ns" for i in range(300)
    ]
    bodies = protocol.pack(lines, max_datagram=400)
    assert len(bodies) > 5
    first = bodies[0].decode().split("\n")
    assert first[1:3] == ["Enter: main", "Thread: 9 wk"]
    for body in bodies[1:]:
        assert body.decode().split("\n")[1] == "Thread: 9 wk"
        assert len(body) <= 400 - protocol.MAX_HEADER
    rebuilt = [ln for b in bodies for ln in b.decode().split("\n")[1:] if ln != "Thread: 9 wk"]
    assert rebuilt == [ln for ln in lines if ln != "Thread: 9 wk"]
    assert protocol.pack(["a", "b"], max_datagram=100) == [b"\na\nb"]  # no marker, none added


def test_the_monitor_passes_markers_over_and_shows_them() -> None:
    monitor = Monitor()
    body = ["Enter: a", "Thread: 5 wk", "Enter: b", "Leave: b, Duration: 3 ns"]
    body += ["Thread: 4 MainThread", "Leave: a, Duration: 9 ns"]
    shown = monitor.feed(protocol.encode("h/1", 0, 0, body))
    assert shown is not None and "Thread: 5 wk" in shown[1]
    top = {name: total for name, _own, total, *_ in monitor.functions.top(5)}
    assert top == {"a": 9, "b": 3}


def test_run_streams_markers_from_two_threads(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(
        "import threading\n"
        "def work(n):\n"
        "    return sum(range(n))\n"
        "def loop():\n"
        "    for _ in range(50):\n"
        "        work(10)\n"
        "t = threading.Thread(target=loop, name='wk')\n"
        "t.start(); loop(); t.join()\n"
    )
    stream = tmp_path / "events.txt"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "profkit",
            "run",
            "--stream",
            str(stream),
            "-o",
            str(tmp_path / "p.json"),
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = stream.read_text().splitlines()
    markers = [line for line in lines if line.startswith("Thread: ")]
    assert any(m.endswith(" wk") for m in markers), lines[:20]
    for line in lines:  # every other line is an event line
        assert line.startswith("Thread: ") or line.lstrip().startswith(
            ("Enter: ", "Leave: ", "Resume: ", "Yield: ")
        )


def test_the_monitor_keeps_self_time_per_thread() -> None:
    """Thread B's call closing under A's open call must not take time out of A's self
    time: each thread's lines are accounted with its own depth sums."""
    monitor = Monitor()
    body = ["Enter: a", "Thread: 5 wk", "Enter: w", "    Leave: b, Duration: 5 ns"]
    body += ["Thread: 4 MainThread", "Leave: a, Duration: 9 ns"]
    monitor.feed(protocol.encode("h/1", 0, 0, body[:3]))
    monitor.feed(protocol.encode("h/1", 1, 0, ["Thread: 5 wk", *body[3:4]]))
    monitor.feed(protocol.encode("h/1", 2, 0, body[4:]))
    own = {name: own for name, own, *_ in monitor.functions.top(5)}
    assert own == {"a": 9, "b": 5}
    unmarked = Monitor()  # the same lines without markers: a's self time loses b's
    unmarked.feed(protocol.encode("h/1", 0, 0, [ln for ln in body if "Thread" not in ln]))
    assert {name: own for name, own, *_ in unmarked.functions.top(5)}["a"] == 4
