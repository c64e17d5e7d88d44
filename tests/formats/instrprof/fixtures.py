"""Access to the real-tool fixtures under ``tests/fixtures/instrprof`` (INSTRPROF-FIX's).

Tests that need them skip cleanly when the tree is absent, so this module never fails
on import.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

#: ``PROFKIT_INSTRPROF_FIXTURES`` points elsewhere (e.g. a stable copy while regenerating).
ROOT = Path(
    os.environ.get("PROFKIT_INSTRPROF_FIXTURES")
    or Path(__file__).resolve().parents[2] / "fixtures" / "instrprof"
)


@lru_cache(maxsize=1)
def manifest() -> list[dict[str, Any]]:
    """Manifest entries, or ``[]`` when the fixtures are missing."""
    try:
        data = json.loads((ROOT / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return []
    return [f for f in data.get("files", []) if (ROOT / f["path"]).exists()]


def entries(kind: str, versions: tuple[int, ...] = (14, 16, 19, 22)) -> list[dict[str, Any]]:
    return [f for f in manifest() if f.get("kind") == kind and f.get("llvm") in versions]


def path_of(entry: dict[str, Any]) -> Path:
    return ROOT / entry["path"]


def show_args(entry: dict[str, Any]) -> list[str]:
    """``llvm-profdata show`` arguments of a manifest entry, with the input made absolute."""
    folder = os.path.dirname(entry["path"])
    return [a if a.startswith("-") else str(ROOT / folder / a) for a in entry["command"][2:]]


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [e["path"] for e in items]
