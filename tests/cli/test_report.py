"""`profkit report` end to end through ``main``."""

from __future__ import annotations

from pathlib import Path

import pytest

from profkit.calltree import file
from profkit.cli.main import main
from tests.calltree.strategies import sample_profile


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "run.json.gz"
    file.save(sample_profile(), path)
    return path


def test_tree_default(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "myapp.core.work" in out and "Thread worker" in out and "\x1b[" not in out


def test_flat_and_callers(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(saved), "--view", "flat", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].endswith("json.dumps") and "2 more functions" in out
    assert main(["report", str(saved), "--view", "callers", "-f", "dumps"]) == 0
    out = capsys.readouterr().out
    assert "called by:" in out and "myapp.core.work" in out


def test_options(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "report",
                str(saved),
                "--min-time",
                "3ms",
                "--prefix",
                "myapp",
                "--color",
                "--width",
                "60",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "\x1b[31m" in out and "json.dumps" not in out


def test_combines_several_files(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "b.json"
    file.save(sample_profile(), other)
    assert main(["report", str(saved), str(other)]) == 0
    assert capsys.readouterr().out.count("pid 4242: MainThread") == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--view", "callers"], "needs --function"),
        (["--view", "callers", "-f", "nothere"], "no function matches"),
        (["--min-time", "soon"], "bad duration"),
        (["--width", "5"], "--width"),
        # these were accepted and printed an empty tree/table
        (["--top", "0"], "--top must be at least 1"),
        (["--view", "flat", "--top", "-1"], "--top must be at least 1"),
        (["--max-depth", "-1"], "--max-depth must be 0 or more"),
    ],
)
def test_usage_errors(
    saved: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["report", str(saved), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("profkit: error:") and message in err


def test_bad_files_give_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "profkit.calltree", "version": 1, "mode": "trace", "frames": 3}')
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err and "/frames" in err
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err == f"profkit: error: {tmp_path / 'missing.json'}: no such file\n"


def test_piped_output_is_80_wide_whatever_the_environment(
    saved: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The width came from COLUMNS (or the terminal pytest ran in) even when stdout was
    not a terminal, so the same command gave different output in different places."""
    monkeypatch.setenv("COLUMNS", "24")
    assert main(["report", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "myapp.core.work" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_gc_is_paused_while_rendering_and_restored(
    saved: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Generation-2 collections re-walked every call node while a big profile was built
    and aggregated (2x the CPU of a 500k-node flat report); the CLI pauses the cyclic GC
    for that, and must give it back."""
    import gc

    import profkit.cli.report as cli_report

    seen: list[bool] = []
    real = cli_report.render_tree

    def spy(*args: object, **kwargs: object) -> str:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cli_report, "render_tree", spy)
    assert gc.isenabled()
    assert main(["report", str(saved)]) == 0
    assert seen == [False] and gc.isenabled()
    assert main(["report", str(saved), "--view", "callers"]) == 2  # an error path restores it too
    assert gc.isenabled()
    capsys.readouterr()


@pytest.mark.parametrize("view", [["--view", "flat"], ["--view", "callers", "-f", "leaf"], []])
def test_every_view_shows_names_in_full_when_not_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], view: list[str]
) -> None:
    """A new user's finding (N11): flat and callers cut names from the left at 80 columns
    when piped (`…r._make_iterencode.<locals>._iterencode_dict`) while the tree shows them
    in full; issue #11: full names when the output is not a terminal, never cut."""
    from profkit.calltree.model import CallProfile, Frame, ThreadTree

    long = "pkg." + ".".join(f"module{i}" for i in range(12)) + ".Encoder.<locals>.leaf"
    p = CallProfile("trace")
    main_ = p.frame_id(Frame("app.main", "/src/app.py", 1))
    leaf = p.frame_id(Frame(long, "/src/pkg/m.py", 2))
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    t.root.calls, t.root.inclusive_ns = 1, 10_000_000
    n = t.root.child(main_)
    n.add_call(10_000_000, 2_000_000)
    n.child(leaf).add_call(8_000_000, 8_000_000)
    path = tmp_path / "long.json"
    file.save(p, path)
    assert main(["report", str(path), *view]) == 0
    out = capsys.readouterr().out
    assert long in out and "…" not in out.replace("… ", ""), out
    # with a width, names are fitted in every view (the tree's hot spots too; the tree
    # keeps a minimum room for names, so only flat and callers fit 60 columns exactly)
    assert main(["report", str(path), *view, "--width", "60"]) == 0
    out = capsys.readouterr().out
    assert long not in out, out
    if view:
        assert max(len(line) for line in out.splitlines()) <= 60, out
