"""The view's rules read names with one C call each; the rule stays ``matches``'."""

from __future__ import annotations

from profkit.calltree.model import CallProfile, Frame
from profkit.report.rules import hidden_frames, is_import
from profkit.report.tree import matches

NAMES = [
    "myapp",
    "myapp.core.f",
    "myapplet.g",
    "profkit",
    "profkit.runner.run",
    "profkitx.f",
    "",
    ".hidden",
    "importlib._bootstrap._find_and_load",
    "importlib._bootstrap_externalx.f",
    "importlib.util.find_spec",
]


def _profile() -> CallProfile:
    profile = CallProfile(mode="trace")
    for name in NAMES:
        profile.frame_id(Frame(name, "x.py", 1))
    return profile


def test_hidden_frames_follow_matches() -> None:
    from profkit.api.names import INTERNAL_MODULES

    profile = _profile()
    for prefixes in [(), ("myapp",), ("myapp", "importlib._bootstrap"), ("",)]:
        expected = [
            matches(f.name, INTERNAL_MODULES) or (bool(prefixes) and not matches(f.name, prefixes))
            for f in profile.frames
        ]
        assert hidden_frames(profile, prefixes) == expected, prefixes


def test_is_import_by_name() -> None:
    names = {f.name: is_import(f) for f in _profile().frames}
    assert names["importlib._bootstrap._find_and_load"]
    assert not names["importlib._bootstrap_externalx.f"]
    assert not names["importlib.util.find_spec"]
