"""Access to the committed LLVM profile fixtures (tests/fixtures/instrprof/MANIFEST.json).

Other test modules use this instead of globbing file names, so that "which fixtures exist,
which LLVM wrote them, with which options" has one source of truth: the manifest written by
scripts/gen_instrprof_fixtures.py.  Import as ``from tests.oracle.helpers import fixtures``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURE_ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "instrprof"
MANIFEST = FIXTURE_ROOT / "MANIFEST.json"
LLVM_VERSIONS = (14, 16, 19, 22)


@dataclass(frozen=True)
class Fixture:
    """One file listed in the manifest.

    ``kind`` is profraw | profdata | proftext | show | overlap | source.  For ``show`` files,
    ``show`` is the key (e.g. ``show-all-counts``) and ``options`` the llvm-profdata options;
    ``inputs`` are fixture-root-relative paths of the files the command read.
    """

    rel: str
    kind: str
    llvm: int | None
    variant: str | None
    show: str | None
    options: tuple[str, ...]
    inputs: tuple[str, ...]
    command: tuple[str, ...]
    sha256: str
    size: int

    @property
    def path(self) -> Path:
        """Absolute path of the file."""
        return FIXTURE_ROOT / self.rel

    @property
    def id(self) -> str:
        """A short, stable pytest id: the fixture-root-relative path."""
        return self.rel

    def read_bytes(self) -> bytes:
        """The file's bytes."""
        return self.path.read_bytes()

    def read_text(self) -> str:
        """The file's text (tool outputs are ASCII/UTF-8)."""
        return self.path.read_text()


@functools.lru_cache(maxsize=1)
def load_manifest() -> dict[str, Any]:
    """The parsed MANIFEST.json (cached)."""
    data: dict[str, Any] = json.loads(MANIFEST.read_text())
    return data


def _entry_to_fixture(entry: dict[str, Any]) -> Fixture:
    return Fixture(
        rel=entry["path"],
        kind=entry["kind"],
        llvm=entry.get("llvm"),
        variant=entry.get("variant"),
        show=entry.get("show"),
        options=tuple(entry.get("options", ())),
        inputs=tuple(entry.get("inputs", ())),
        command=tuple(entry.get("command", ())),
        sha256=entry["sha256"],
        size=entry["size"],
    )


@functools.lru_cache(maxsize=1)
def _all() -> tuple[Fixture, ...]:
    return tuple(_entry_to_fixture(e) for e in load_manifest()["files"])


def fixtures(
    kind: str | None = None,
    llvm: int | None = None,
    variant: str | None = None,
    show: str | None = None,
) -> Iterator[Fixture]:
    """Iterate manifest entries, optionally filtered by kind, LLVM version, variant, show key."""
    for fx in _all():
        if kind is not None and fx.kind != kind:
            continue
        if llvm is not None and fx.llvm != llvm:
            continue
        if variant is not None and fx.variant != variant:
            continue
        if show is not None and fx.show != show:
            continue
        yield fx


def profiles(llvm: int | None = None) -> list[Fixture]:
    """Every raw, indexed and text profile (cross/ indexed files included)."""
    return [fx for fx in fixtures(llvm=llvm) if fx.kind in ("profraw", "profdata", "proftext")]


def by_path(rel: str) -> Fixture:
    """The manifest entry for one fixture-root-relative path (KeyError if absent)."""
    for fx in _all():
        if fx.rel == rel:
            return fx
    raise KeyError(rel)


def outputs_of(profile: Fixture, kind: str = "show") -> dict[str, Fixture]:
    """Saved tool outputs whose only input is ``profile``: show key -> fixture."""
    return {fx.show or fx.rel: fx for fx in fixtures(kind=kind) if fx.inputs == (profile.rel,)}


def llvm_profdata_path(version: int) -> str | None:
    """Path of llvm-profdata-<version> on PATH, or None."""
    return shutil.which(f"llvm-profdata-{version}")


@functools.cache
def profkit_help(*words: str) -> str:
    """``profkit <words> --help`` text (empty if the command does not exist)."""
    from profkit.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        contextlib.suppress(SystemExit),
    ):
        main([*words, "--help"])
    return out.getvalue()


def profkit_merge_available() -> bool:
    """True once ``profkit profdata merge`` is implemented (not the placeholder)."""
    return "--indexed-version" in profkit_help("profdata", "merge")
