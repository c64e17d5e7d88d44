"""``profkit run -o out.html`` (and the other export formats) writes that format directly
(issue #11 item 5): chosen by ``--format`` or by ``-o``'s ending, said how to view."""

from __future__ import annotations

import gzip
import json
import os
import pstats
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.export.destination import Destination, child_template

PROGRAM = """\
import subprocess, sys
def work():
    return sum(i * i for i in range(20000))
work()
if len(sys.argv) > 1:
    subprocess.run([sys.executable, "-c", "def kid():\\n    return 1\\nkid()"], check=True)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "profkit", "run", "--no-tree", *args]
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)


def _check(fmt: str, path: Path) -> None:
    data = path.read_bytes()
    if fmt == "html":
        assert b"<html" in data.lower() and b"work" in data
    elif fmt == "speedscope":
        doc = json.loads(data)
        assert "speedscope" in doc["$schema"]
        assert any(f["name"].endswith("work") for f in doc["shared"]["frames"])
    elif fmt == "chrome":
        doc = json.loads(data)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        assert any(str(e.get("name", "")).endswith("work") for e in events)
    elif fmt == "pstats":
        stats = pstats.Stats(str(path))
        assert any(func[2].endswith("work") for func in stats.stats)  # type: ignore[attr-defined]
    elif fmt == "collapsed":
        lines = data.decode().splitlines()
        assert lines and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
        assert any("work" in line for line in lines)
    elif fmt == "pprof":
        assert b"work" in gzip.decompress(data)
    else:
        assert json.loads(data)["format"].startswith("profkit")


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("out.html", "html"),
        ("out.speedscope.json", "speedscope"),
        ("out.trace.json", "chrome"),
        ("out.pstats", "pstats"),
        ("out.collapsed", "collapsed"),
        ("out.pb.gz", "pprof"),
        ("out.json", "profile"),
    ],
)
def test_the_output_name_chooses_the_format(name: str, fmt: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(PROGRAM)
    out = _run(["-o", name, "app.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    _check(fmt, tmp_path / name)
    view = [line for line in out.stderr.splitlines() if line.startswith("profkit: view it: ")]
    assert len(view) == 1 and name in view[0]


def test_format_flag_wins_and_names_the_default_file(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(PROGRAM)
    out = _run(["--format", "speedscope", "-o", "prof.out", "app.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    _check("speedscope", tmp_path / "prof.out")
    out = _run(["--format", "html", "app.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    (made,) = tmp_path.glob("profkit-app-*.html")
    _check("html", made)


def test_a_bad_format_is_one_line(tmp_path: Path) -> None:
    out = _run(["--format", "svg", "-c", "print('ran')"], tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().startswith("profkit: error: --format='svg': expected one of")


def test_children_write_the_same_format(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(PROGRAM)
    out = _run(["-o", "out.speedscope.json", "app.py", "kids"], tmp_path)
    assert out.returncode == 0, out.stderr
    (child,) = tmp_path.glob("out.[0-9]*.speedscope.json")
    doc = json.loads(child.read_text())
    assert any(f["name"].endswith("kid") for f in doc["shared"]["frames"])


def test_unwritable_export_is_an_error_after_the_program_ran(tmp_path: Path) -> None:
    out = _run(["-o", str(tmp_path / "no" / "x.html"), "-c", "print('ran')"], tmp_path)
    assert out.stdout == "ran\n"
    assert out.returncode == 2
    assert "cannot write profile" in out.stderr and "exited with status 0" in out.stderr


def _format_for(output: str | None, explicit: str) -> str:
    return Destination.decide(output, explicit, "x").format.name


def test_format_and_child_names() -> None:
    assert _format_for("a.HTML", "") == "html"
    assert _format_for("a.json.gz", "") == "profile"
    assert _format_for(None, "") == "profile"
    assert _format_for("a.html", "pstats") == "pstats"
    assert child_template("o.pb.gz") == "o.{pid}.pb.gz"
    assert child_template("o.speedscope.json") == "o.{pid}.speedscope.json"
    assert child_template(".json.gz") == ".json.{pid}.gz"
