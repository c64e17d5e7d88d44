"""A bounded mutation sweep over the reader *and* the export path (issue #17, "Done
when"): every mutated profile that loads must export to every format and render in every
view, or fail with one ProfkitError; never another exception, never a hang."""

from __future__ import annotations

import contextlib
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings

from profkit.calltree import file
from profkit.calltree.model import CallProfile
from profkit.errors import ProfkitError
from profkit.export.registry import EXPORTS
from profkit.report.flat import render_callers, render_flat
from profkit.report.text import render_tree
from tests.calltree.strategies import profiles, sample_profile

_INTS = [0, 1, -1, 2**63 - 1, 2**62, 7, 10**12]


def _every_view(profile: CallProfile) -> None:
    for fmt in EXPORTS:
        fmt.writer(profile)
    render_tree(profile, width=None, fold=True, hot_spots=3, min_share=0.02)
    render_tree(profile, width=60, top=2, max_depth=3)
    render_flat(profile)
    if profile.frames:
        with contextlib.suppress(ProfkitError):
            render_callers(profile, profile.frames[0].name)


def _mutations(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    base = file.to_json(sample_profile())
    out = []
    for _ in range(count):
        doc = json.loads(json.dumps(base))
        for _ in range(rng.randint(1, 4)):
            rows = doc["threads"][rng.randrange(len(doc["threads"]))]["nodes"]
            what = rng.random()
            if what < 0.5 and len(rows) > 1:
                row = rows[rng.randrange(1, len(rows))]
                row[rng.randrange(2, 7)] = rng.choice(_INTS)
            elif what < 0.7 and doc["spans"]:
                span = doc["spans"][rng.randrange(len(doc["spans"]))]
                span[rng.randrange(2, 5)] = rng.choice(_INTS)
            elif what < 0.85:
                doc["frames"][rng.randrange(len(doc["frames"]))][0] = rng.choice(
                    ["", ";", "\x1b]0;x\x07", "a b\nc", "<lambda>", "\ud800", "x" * 5000]
                )
            else:
                doc["threads"][0]["native_id"] = rng.choice(_INTS)
                doc["threads"][0]["pid"] = rng.choice(_INTS)
        out.append(json.dumps(doc).encode("utf-8", "surrogatepass"))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_mutated_profiles_export_or_fail_cleanly(seed: int) -> None:
    for raw in _mutations(seed, 60):
        try:
            profile = file.loads(raw, path="m.json")
        except ProfkitError:
            continue
        _every_view(profile)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles())
def test_random_valid_profiles_export_and_render(profile: CallProfile) -> None:
    _every_view(profile)
