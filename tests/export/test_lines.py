"""Line numbers in the exports (issue #25 item 8): where each format has a place for them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from profkit.calltree import file
from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.cli.main import main
from profkit.export import chrome, collapsed, pprof, speedscope
from tests.export import protobuf


def _profile() -> CallProfile:
    """Two functions of one name in two files, and a C function (no file)."""
    p = CallProfile("trace")
    t = ThreadTree(1, "T", native_id=11)
    p.threads.append(t)
    main_ = t.root.child(p.frame_id(Frame("app.main", "/src/app.py", 3)))
    main_.add_call(10, 1)
    main_.child(p.frame_id(Frame("m.run", "/src/a.py", 20))).add_call(4, 4)
    main_.child(p.frame_id(Frame("m.run", "/lib/b.py", 40))).add_call(3, 3)
    main_.child(p.frame_id(Frame("builtins.len"))).add_call(2, 2)
    t.root.inclusive_ns = 10
    return p


def test_collapsed_keeps_its_default_and_adds_lines_on_request() -> None:
    plain = collapsed.write(_profile()).decode().splitlines()
    assert plain == ["app.main 1", "app.main;m.run 7", "app.main;builtins.len 2"]
    out = bytearray()

    class Sink:
        def write(self, data: bytes) -> None:
            out.extend(data)

    collapsed.write_to(_profile(), Sink(), lines=True)  # type: ignore[arg-type]
    assert out.decode().splitlines() == [
        "app.main (app.py:3) 1",
        "app.main (app.py:3);m.run (a.py:20) 4",
        "app.main (app.py:3);m.run (b.py:40) 3",
        "app.main (app.py:3);builtins.len 2",
    ]


def test_chrome_events_carry_file_and_line_in_args() -> None:
    for p in (_profile(),):
        doc = json.loads(chrome.write(p))
        xs = {e["name"]: e for e in doc["traceEvents"] if e["ph"] == "X"}
        assert xs["app.main"]["args"]["file"] == "/src/app.py"
        assert xs["app.main"]["args"]["line"] == 3
        assert "file" not in xs["builtins.len"]["args"]
        assert xs["builtins.len"]["name"] == "builtins.len"  # names stay bare: slices group


def test_speedscope_and_pprof_frames_have_lines() -> None:
    frames = json.loads(speedscope.write(_profile()))["shared"]["frames"]
    assert {(f["name"], f.get("file"), f.get("line")) for f in frames} >= {
        ("m.run", "/src/a.py", 20),
        ("m.run", "/lib/b.py", 40),
    }
    msg = protobuf.fields(gzip.decompress(pprof.write(_profile())))
    strings = [s.decode() for s in msg[6]]  # type: ignore[union-attr]
    names = {}
    for f in msg[5]:
        fm = protobuf.fields(f)  # type: ignore[arg-type]
        names[protobuf.one(fm, 1)] = (strings[protobuf.one(fm, 2)], protobuf.one(fm, 5))
    lines = set()
    for loc in msg[4]:
        line = protobuf.fields(protobuf.fields(loc)[4][0])  # type: ignore[arg-type]
        name, start = names[protobuf.one(line, 1)]
        lines.add((name, protobuf.one(line, 2), start))
    assert ("m.run", 40, 40) in lines and ("app.main", 3, 3) in lines


def test_export_lines_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    file.save(_profile(), path)
    assert main(["export", str(path), "-F", "collapsed", "--lines", "-o", "-"]) == 0
    assert "m.run (b.py:40) 3" in capsys.readouterr().out
    assert main(["export", str(path), "-F", "chrome", "--lines", "-o", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--lines applies to -F collapsed" in err[0]
