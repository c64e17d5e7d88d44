"""The engine contract: engines import it, never the runner; the runner calls declared hooks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from profkit.calltree.model import CallProfile
from profkit.engine.contract import (
    ChildEngine,
    Finished,
    Job,
    Outcome,
    ProfilerChoice,
    outcome_of_returncode,
    python_program,
)
from profkit.runner import choice, session
from profkit.runner.python import Program
from profkit.settings import Settings

SRC = Path(__file__).resolve().parents[2] / "src" / "profkit"


def test_the_runner_probes_no_engine_hook() -> None:
    """STYLE.md's anti-pattern 3: the hooks are declared (Engine), never looked up."""
    tree = ast.parse((SRC / "runner" / "session.py").read_text(encoding="utf-8"))
    probes = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"hasattr", "getattr"}
    ]
    assert probes == []


def test_every_engine_in_the_table_satisfies_the_contract() -> None:
    for row in choice.CHOICES:
        engine = row.load_engine()
        for hook in ("unavailable", "prepare", "run", "begin", "end", "stop_now", "hook_note"):
            assert callable(getattr(engine, hook)), (row.engine, hook)
        assert isinstance(engine.in_process, bool) and isinstance(engine.records_calls, bool)


def test_outcome_is_the_runners() -> None:
    from profkit.runner import outcome

    assert outcome.Outcome is Outcome
    assert outcome.outcome_of_returncode is outcome_of_returncode
    assert choice.Finished is Finished and choice.Job is Job


def test_python_program_refuses_another_kind() -> None:
    program = Program("script", "app.py")
    assert python_program(program) is program

    class Other:
        kind = "dotnet"
        label = "app"

    with pytest.raises(TypeError, match="dotnet"):
        python_program(Other())


class _Target:
    kind = "fake"
    label = "fake"


class _ChildOnly(ChildEngine):
    """Runs nothing; the profile it hands back is empty."""

    def unavailable(self, job: Job) -> str | None:
        return None

    def prepare(self, job: Job) -> tuple[str, ...]:
        return ()

    def run(self, job: Job) -> Finished:
        return Finished(Outcome(7), CallProfile(mode="trace"))


def test_a_child_engine_is_run_and_its_ending_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    row = ProfilerChoice("trace", ("fake",), f"{__name__}:_ChildOnly", "")
    monkeypatch.setattr(choice, "CHOICES", (row,))
    said: list[str] = []
    out = tmp_path / "p.json"
    result = session.run(_Target(), Settings(output=str(out), tree=False), said.append)
    assert result.outcome == Outcome(7) and result.status == 7
    assert out.exists()
    assert any("profile saved to" in line for line in said)
    engine = _ChildOnly()
    assert engine.stop_now() is None and engine.hook_note() is None
    with pytest.raises(TypeError):
        engine.end(None)
