"""The HTML flame graph rendered by a real headless Chromium: frames appear in the DOM."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profkit.calltree.model import Frame
from profkit.export import html as html_export
from tests.calltree.strategies import sample_profile

CHROMIUM = next(
    (
        p
        for p in (
            "/usr/bin/chromium",
            shutil.which("chromium") or "",
            shutil.which("chromium-browser") or "",
        )
        if p and Path(p).exists()
    ),
    None,
)


def _dump_dom(page: Path, profile_dir: Path, fragment: str = "") -> str:
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile_dir}",
        "--dump-dom",
        page.as_uri() + fragment,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip("chromium did not finish in 90 s")
    if done.returncode != 0 or not done.stdout:
        pytest.skip(f"chromium failed to run (status {done.returncode})")
    return done.stdout.decode("utf-8", "replace")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_chromium_renders_the_flame_graph(tmp_path: Path) -> None:
    prof = sample_profile()
    prof.frames[2] = Frame("json.dumps</script><i>x", "j.py", 1)
    page = tmp_path / "flame.html"
    page.write_bytes(html_export.write(prof))
    dom = _dump_dom(page, tmp_path / "chromium-profile")
    frames = re.findall(r'<div class="fr[^"]*"[^>]*>([^<]*)</div>', dom)
    for name in (
        "all threads",
        "thread MainThread (id 1)",
        "thread worker (id 2)",
        "myapp.main",
        "myapp.core.work",
        "myapp.core.helper",
        "json.dumps&lt;/script&gt;&lt;i&gt;x",
    ):
        assert name in frames, (name, frames)
    assert frames.count("myapp.core.helper") == 2
    assert "12.0 ms shown" in dom  # the script ran: its status line is in the DOM


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_chromium_search_highlights_matches(tmp_path: Path) -> None:
    page = tmp_path / "flame.html"
    page.write_bytes(html_export.write(sample_profile()))
    dom = _dump_dom(page, tmp_path / "chromium-profile", "#search=helper")
    matched = re.findall(r'<div class="fr match"[^>]*>([^<]*)</div>', dom)
    assert matched == ["myapp.core.helper"] * 2
    assert "matches: 4.00 ms (33.3%)" in dom
