"""``profkit report --lines``: the hottest lines of a sampled profile (issue #25 item 8)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from profkit.calltree import file
from profkit.calltree.building import add_stack
from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.cli.main import main
from profkit.errors import ProfileDataError, UsageError
from profkit.report.lines import LineRow, line_rows, merge_rows, render_lines


def sampled(lines: list[list[int]] | object, samples: int = 10) -> CallProfile:
    """Two functions, ``samples`` samples, per-line rows as the sampler stores them."""
    p = CallProfile("sample")
    work = p.frame_id(Frame("app.work", "/src/app.py", 10))
    main_ = p.frame_id(Frame("app.main", "/src/app.py", 1))
    t = ThreadTree(7, "MainThread", native_id=7)
    add_stack(t.root, [main_, work], samples, samples * 1_000_000)
    p.threads.append(t)
    p.metadata = {"sampler": {"lines": lines}}
    assert (work, main_) == (0, 1)
    return p


def test_rows_sorted_with_share_of_all_samples() -> None:
    rows, total = line_rows(sampled([[0, 12, 6], [0, 11, 3], [1, 4, 1]]))
    assert total == 10
    text = render_lines(merge_rows([rows]), total, width=None)
    lines = text.splitlines()
    assert lines[0] == "3 lines, 10 samples in total"
    assert lines[2].split() == ["6", "60.0%", "/src/app.py:12", "(app.work)"]
    assert lines[3].split()[:3] == ["3", "30.0%", "/src/app.py:11"]
    assert lines[4].endswith("/src/app.py:4 (app.main)")


def test_top_prefix_and_merge() -> None:
    a = [LineRow("/a.py", 1, "m.f", 2), LineRow("/a.py", 2, "m.f", 1)]
    b = [LineRow("/a.py", 1, "m.f", 5), LineRow("/b.py", 3, "other.g", 4)]
    rows = merge_rows([a, b])
    assert [(r.file, r.line, r.samples) for r in rows] == [
        ("/a.py", 1, 7),
        ("/b.py", 3, 4),
        ("/a.py", 2, 1),
    ]
    text = render_lines(rows, 12, width=None, top=1)
    assert "/a.py:1 (m.f)" in text and "2 more lines not shown" in text
    text = render_lines(rows, 12, width=None, prefix="other")
    assert "/b.py:3" in text and "/a.py" not in text


def test_profiles_without_lines_say_how_to_get_them() -> None:
    p = sampled([])
    p.metadata = {}
    with pytest.raises(UsageError, match=r"no per-line samples.*--mode sample"):
        line_rows(p, "x.json")


@pytest.mark.parametrize(
    "bad",
    [
        "lines",
        [[0, 1]],
        [[5, 1, 1]],
        [[-1, 1, 1]],
        [[0, 1, -3]],
        [[0, "1", 1]],
        [[0, 1, True]],
        [None],
    ],
)
def test_malformed_rows_name_the_file(bad: object) -> None:
    with pytest.raises(ProfileDataError, match=r"^x\.json: malformed: metadata sampler\.lines"):
        line_rows(sampled(bad), "x.json")


def test_mutated_rows_never_traceback() -> None:
    """Fuzz-style: random edits of the rows either render or raise the one error type."""
    rng = random.Random(25)
    good = [[0, 12, 6], [0, 11, 3], [1, 4, 1]]
    values: list[object] = [0, 1, -1, 2, 10**30, "x", None, 1.5, [], True]
    for _ in range(300):
        rows = json.loads(json.dumps(good))
        item = rng.randrange(len(rows))
        if rng.random() < 0.2:
            rows[item] = rows[item][: rng.randrange(3)]
        else:
            rows[item][rng.randrange(3)] = rng.choice(values)
        try:
            got, total = line_rows(sampled(rows), "f")
        except ProfileDataError as exc:
            assert str(exc).startswith("f: malformed:")
        else:
            render_lines(merge_rows([got]), total)


def test_cli_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.json"
    file.save(sampled([[0, 12, 6], [1, 4, 4]]), path)
    assert main(["report", str(path), str(path), "--lines", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "20 samples in total" in out and "12  60.0%  /src/app.py:12 (app.work)" in out
    traced = tmp_path / "t.json"
    p = sampled([])
    p.mode, p.metadata = "trace", {}
    file.save(p, traced)
    assert main(["report", str(traced), "--lines"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("profkit: error:") and "mode trace" in err[0]
