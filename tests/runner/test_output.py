"""The end-of-run tree: fitted to a terminal, and not one tree per thread for hundreds."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from profkit.calltree.model import CallNode, CallProfile, Frame, ThreadTree
from profkit.export.destination import child_template, output_path
from profkit.runner.output import MAX_THREADS_SHOWN, render


def _profile(threads: int) -> CallProfile:
    profile = CallProfile(mode="trace")
    frame = profile.frame_id(Frame("app.work", "/src/app.py", 1))
    for i in range(threads):
        root = CallNode(-1)
        node = root.child(frame)
        node.calls, node.inclusive_ns, node.exclusive_ns = 1, 1000 * (i + 1), 1000 * (i + 1)
        root.inclusive_ns = node.inclusive_ns
        profile.threads.append(ThreadTree(i + 1, f"T{i + 1}", root))
    return profile


def test_many_threads_print_only_the_busiest() -> None:
    profile = _profile(MAX_THREADS_SHOWN + 12)
    text = render(profile, io.StringIO())
    shown = [line for line in text.splitlines() if line.startswith("Thread ")]
    assert len(shown) == MAX_THREADS_SHOWN
    # the busiest are the last ones created; they keep their order
    names = [line.split()[1] for line in shown]
    assert names == [f"T{i}" for i in range(13, MAX_THREADS_SHOWN + 13)]
    assert "… 12 more threads" in text
    assert len(profile.threads) == MAX_THREADS_SHOWN + 12  # the profile itself is untouched


def test_few_threads_print_all() -> None:
    text = render(_profile(3), io.StringIO())
    assert text.count("Thread ") == 3 and "more threads" not in text


def test_child_template() -> None:
    assert child_template("out.json") == "out.{pid}.json"
    assert child_template("d/out.json.gz") == "d/out.{pid}.json.gz"
    assert child_template("noext") == "noext.{pid}.json"


def test_output_path(tmp_path: Path) -> None:
    pid = os.getpid()
    # The default name: program, pid and 8 random hex digits (issue #17 item 5: a name
    # that can be predicted can be planted in a shared directory).
    default = re.compile(rf"profkit-app-{pid}-[0-9a-f]{{8}}\.json")
    assert default.fullmatch(output_path(None, "app"))
    assert output_path(None, "app") != output_path(None, "app")
    assert output_path("o.{pid}.json", "app", "/base") == f"/base/o.{pid}.json"
    assert output_path("/abs/o.json", "app", "/base") == "/abs/o.json"
    # a directory gets the default name inside it: existing, or named with a trailing /
    (tmp_path / "runs").mkdir()
    inside = output_path(str(tmp_path / "runs"), "app")
    assert os.path.dirname(inside) == str(tmp_path / "runs")
    assert default.fullmatch(os.path.basename(inside))
    missing = output_path("missing/", "c", "/b")
    assert re.fullmatch(rf"/b/missing/profkit-c-{pid}-[0-9a-f]{{8}}\.json", missing)
