"""The HTML view in a real headless Chromium: what a person sees at first load, and clicks.

One browser for the module (its start is most of the cost), driven over the DevTools
protocol (:mod:`tests.export.chromium`). "Visible" means on screen: the row's box is inside
the viewport and the browser's own hit test at its centre lands on it, not merely in the
DOM. The screenshot of the first load is saved next to the page (pytest's tmp dir).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profkit.calltree.model import CallNode, CallProfile, Frame, Span, ThreadTree
from profkit.export import html as html_export
from tests.calltree.strategies import sample_profile
from tests.export.chromium import BrowserError, Chromium, find

CHROMIUM = find()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian: apt-get install chromium; .ci/run does it as root)",
)

APP = "/home/u/app/app.py"
LIB = "/home/u/.venv/lib/python3.11/site-packages/fancylib/"
_FRAMES = [
    Frame("__main__.<module>", APP, 1),
    Frame("__main__.main", APP, 10),
    Frame("__main__.crunch", APP, 20),
    Frame("importlib._bootstrap._find_and_load", "<frozen importlib._bootstrap>", 1165),
    Frame("importlib._bootstrap._load_unlocked", "<frozen importlib._bootstrap>", 666),
    Frame("fancylib.core.setup", LIB + "core.py", 5),
    Frame("fancylib.core.walk", LIB + "core.py", 40),
    Frame("fancylib.util.visit", LIB + "util.py", 12),
    Frame("__main__.on_item", APP, 30),
    Frame("builtins.len", "", 0),
    Frame("json.encoder.JSONEncoder.encode", "/usr/lib/python3.11/json/encoder.py", 183),
]
MS = 1_000_000


def _node(frame: int, total: int, own: int, *children: CallNode) -> CallNode:
    node = CallNode(frame, calls=1, inclusive_ns=total * MS, exclusive_ns=own * MS)
    node.children = {c.frame: c for c in children}
    return node


def app_profile(mode: str = "trace") -> CallProfile:
    """A program that imports a library, works itself (``crunch``) and hands the library a
    callback (``on_item``): the shapes the view folds and lifts."""
    tree = _node(
        -1,
        100,
        0,
        _node(
            0,
            100,
            0,
            _node(3, 20, 1, _node(4, 19, 1, _node(5, 18, 18))),
            _node(
                1,
                80,
                0,
                _node(2, 30, 30),
                _node(
                    6, 45, 1, _node(7, 44, 4, _node(8, 30, 25, _node(9, 5, 5)), _node(10, 10, 10))
                ),
                _node(10, 5, 5),
            ),
        ),
    )
    meta: dict[str, Any] = {"profiler": "profkit.profilers.elt", "argv": ["app.py"]}
    if mode == "memory":
        meta["metric"] = "alloc_bytes"
    profile = CallProfile(mode, list(_FRAMES), [ThreadTree(1, "MainThread", tree)], metadata=meta)  # type: ignore[arg-type]
    if mode == "trace":
        profile.spans = [
            Span(0, 0, 0, 100 * MS, 0),
            Span(0, 1, 20 * MS, 100 * MS, 1),
            Span(0, 2, 20 * MS, 50 * MS, 2),
        ]
    return profile


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    assert CHROMIUM is not None
    try:
        chrome = Chromium(CHROMIUM, tmp_path_factory.mktemp("chromium-profile"))
        chrome.call("Target.getTargets", timeout=60)
    except (BrowserError, OSError) as e:
        pytest.skip(f"chromium did not start: {e}")
    yield chrome
    chrome.close()


def _open(browser: Chromium, tmp: Path, profile: CallProfile, fragment: str = "") -> Path:
    page = tmp / "view.html"
    page.write_bytes(html_export.write(profile))
    browser.open(page.as_uri() + fragment)
    browser.wait_for("document.querySelector('#tree .row, #chart .fr')")
    return page


_ROW = """(function (name) {
  var rows = Array.from(document.querySelectorAll('#tree .row .n'))
    .filter(function (n) { return n.textContent.indexOf(name) === 0; });
  if (!rows.length) { return null; }
  var b = rows[0].getBoundingClientRect(), x = b.left + Math.min(b.width, 40) / 2, y = b.top + b.height / 2;
  var hit = document.elementFromPoint(x, y);
  return {x: x, y: y, text: rows[0].textContent, visible: b.width > 0 && b.top >= 0 &&
          b.bottom <= innerHeight && b.left >= 0 && b.right <= innerWidth && rows[0].contains(hit)};
})(%s)"""


def _row(browser: Chromium, name: str) -> dict[str, Any] | None:
    found = browser.evaluate(_ROW % json.dumps(name))
    return dict(found) if found else None


def test_own_functions_are_visible_at_first_load_and_a_library_fold_opens(
    browser: Chromium, tmp_path: Path
) -> None:
    page = _open(browser, tmp_path, app_profile())
    for own in ("__main__.main", "__main__.crunch", "__main__.on_item"):  # on_item: lifted
        row = _row(browser, own)
        assert row is not None and row["visible"], (own, row)
    where = browser.evaluate("document.querySelector('#tree .row.own .w').textContent")
    assert where == "app.py:1"  # file:line on the row, relative to the script's directory
    assert _row(browser, "fancylib.util.visit") is None  # folded away
    group = _row(browser, "\u25b8 2 frames hidden (fancylib, json)")
    assert group is not None and group["visible"], group
    browser.screenshot(page.with_suffix(".png"))
    browser.click(group["x"], group["y"])
    browser.wait_for(
        "document.querySelector('#tree .row.group .n').textContent.charAt(0) === '\u25be'"
    )
    opened = _row(browser, "fancylib.util.visit")
    assert opened is not None and opened["visible"], opened
    browser.screenshot(page.with_name("view-opened.png"))
    assert os.path.getsize(page.with_suffix(".png")) > 1000


def test_import_machinery_is_folded_and_hot_spots_are_listed(
    browser: Chromium, tmp_path: Path
) -> None:
    _open(browser, tmp_path, app_profile())
    head = _row(browser, "importlib._bootstrap._find_and_load")
    assert head is not None and head["visible"]
    assert _row(browser, "importlib._bootstrap._load_unlocked") is None
    hot = browser.evaluate("document.getElementById('hot').textContent")
    assert "__main__.crunch" in hot and "__main__.on_item" in hot


def test_search_opens_the_fold_that_hides_a_match(browser: Chromium, tmp_path: Path) -> None:
    _open(browser, tmp_path, app_profile(), "#search=_load_unlocked")
    found = _row(browser, "importlib._bootstrap._load_unlocked")
    assert found is not None and found["visible"], found
    assert browser.evaluate("document.querySelectorAll('#tree .row.match').length") == 1
    assert "1 matches" in browser.evaluate("document.getElementById('status').textContent")


def test_flame_graph_and_its_flip(browser: Chromium, tmp_path: Path) -> None:
    _open(browser, tmp_path, app_profile(), "#view=graph")
    tops = (
        "(function () { var o = {}; document.querySelectorAll('#chart .fr').forEach("
        "function (e) { o[e.textContent] = parseFloat(e.style.top); }); return o; })()"
    )
    icicle = browser.evaluate(tops)
    assert icicle["__main__.main"] < icicle["__main__.crunch"]  # callers above
    assert "2 frames hidden (fancylib, json)" in " ".join(icicle)
    browser.evaluate("document.getElementById('flip').click()")
    flame = browser.evaluate(tops)
    assert flame["__main__.main"] > flame["__main__.crunch"]  # callers below


def test_timeline_view_draws_the_spans(browser: Chromium, tmp_path: Path) -> None:
    _open(browser, tmp_path, app_profile(), "#view=time")
    names = browser.evaluate(
        "Array.from(document.querySelectorAll('#chart .fr')).map(function (e) { return e.textContent; })"
    )
    assert {"__main__.<module>", "__main__.main", "__main__.crunch"} <= set(names)


def test_memory_profile_in_bytes_and_no_timeline(browser: Chromium, tmp_path: Path) -> None:
    profile = app_profile("memory")
    _open(browser, tmp_path, profile)
    assert "MiB" in browser.evaluate("document.getElementById('tree').textContent")
    assert browser.evaluate("document.getElementById('v-time').disabled") is True


def test_a_trimmed_page_says_what_it_left_out(
    browser: Chromium, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from profkit.export import html_data

    monkeypatch.setattr(html_data, "MAX_NODES", 4)
    _open(browser, tmp_path, app_profile())
    note = browser.evaluate("document.getElementById('note').textContent")
    assert "left out" in note and "profkit report" in note
    row = _row(browser, "__main__.main")
    assert row is not None and row["visible"]


def test_names_are_text_never_markup(browser: Chromium, tmp_path: Path) -> None:
    prof = sample_profile()
    prof.frames[2] = Frame("json.dumps</script><i>x", "j.py", 1)
    _open(browser, tmp_path, prof, "#view=graph")
    names = browser.evaluate(
        "Array.from(document.querySelectorAll('#chart .fr')).map(function (e) { return e.textContent; })"
    )
    assert "json.dumps</script><i>x" in names
    assert browser.evaluate("document.querySelectorAll('#chart i').length") == 0


def test_a_recursion_folds_to_one_row_that_opens(browser: Chromium, tmp_path: Path) -> None:
    frames = [Frame("__main__.main", APP, 1), Frame("__main__.rec", APP, 5)]
    root = CallNode(-1, inclusive_ns=50)
    node = root.child(0)
    node.calls, node.inclusive_ns = 1, 50
    for level in range(40):
        node = node.child(1)
        node.calls, node.inclusive_ns, node.exclusive_ns = 1, 40 - level, 1
    profile = CallProfile("trace", frames, [ThreadTree(1, "MainThread", root)])
    _open(browser, tmp_path, profile)
    chain = _row(browser, "\u2506 38 more levels of __main__.rec")
    assert chain is not None and chain["visible"], chain
    assert browser.evaluate("document.querySelectorAll('#tree .row.own').length") == 3
    browser.click(chain["x"], chain["y"])
    browser.wait_for("document.querySelectorAll('#tree .row.own').length > 3")


def test_unfolding_everything_and_a_hot_spot_click(browser: Chromium, tmp_path: Path) -> None:
    _open(browser, tmp_path, app_profile())
    browser.evaluate("document.getElementById('fold').click()")
    shown = _row(browser, "fancylib.util.visit")
    assert shown is not None and shown["visible"], shown
    assert browser.evaluate("document.querySelectorAll('#tree .row.group').length") == 0
    browser.evaluate("document.getElementById('fold').click()")
    spot = browser.evaluate(
        "(function () { var s = Array.from(document.querySelectorAll('#hot .spot')).filter("
        "function (e) { return e.textContent.indexOf('json.encoder') === 0; })[0];"
        " s.click(); return document.getElementById('search').value; })()"
    )
    assert spot == "json.encoder.JSONEncoder.encode"
    assert browser.evaluate("document.querySelectorAll('#tree .row.match').length") == 2
