"""Load profkit's gecko exports in a real Firefox Profiler, in headless Chromium.

Not a test (the profiler is not part of profkit, nor installed by it): the check issue 25
asked for once, repeatable by anyone who has built the profiler from its public repository
(docs/reports.md, "Firefox Profiler", says how). For each ``*.gecko.json`` given, it serves
the file on localhost (with CORS, as ``/from-url/`` fetches it), opens
``PROFILER/from-url/<url>/calltree/``, and reports what the profiler shows: an error
message if it rejected the file, else the call tree's first rows (names and totals), the
threads' tracks, the categories and the marker count. A screenshot of the call tree (and
of the stack chart and marker chart) goes to ``--shots``.

    python scripts/check_firefox_profiler.py --profiler http://localhost:4243 \\
        --chromium /usr/bin/chromium --shots /tmp/ffp-shots out.gecko.json ...

Needs ``pip install playwright`` (its Python package only: the browser is the system's
Chromium, given by ``--chromium``; no ``playwright install``). Exit status 1 if any file
was rejected or showed an empty call tree.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import sys
import threading
import urllib.parse
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class _CorsHandler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", "*")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``directory`` on an ephemeral localhost port; (server, base URL)."""
    handler = functools.partial(_CorsHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def check(page: Any, profiler: str, url: str, shots: Path, stem: str) -> dict[str, Any]:
    """Open one profile; what the profiler shows of it."""
    errors: list[str] = []
    # A development build has no service worker (``yarn build-prod`` makes sw.js): not ours.
    page.on(
        "pageerror",
        lambda exc: None if "ServiceWorker" in str(exc) else errors.append(f"page error: {exc}"),
    )
    target = f"{profiler}/from-url/{urllib.parse.quote(url, safe='')}/calltree/"
    page.goto(target)
    rows = page.locator(".treeViewRow")
    problem = page.locator(".appErrorBoundaryContents, .profileLoaderError, .homeSectionError")
    try:
        page.wait_for_function(
            "() => document.querySelector('.treeViewRow') || document.querySelector("
            "'.appErrorBoundaryContents, .homeSectionError, .profileLoaderError')",
            timeout=120_000,
        )
    except Exception as exc:  # the page never got there: say what it shows
        errors.append(f"timeout: {exc.__class__.__name__}")
    result: dict[str, Any] = {"file": stem, "errors": errors}
    if problem.count():
        result["errors"].append(problem.first.inner_text()[:500])
    page.wait_for_timeout(500)
    # expand everything under the first root ('*' expands all descendants)
    if rows.count():
        rows.first.click()
        page.locator(".treeViewBody").first.press("*")
        page.wait_for_timeout(500)
    result["calltree"] = [r.inner_text().replace("\n", " | ") for r in rows.all()[:25]]
    result["tracks"] = [t.inner_text() for t in page.locator(".timelineTrackThreadRow").all()]
    page.screenshot(path=str(shots / f"{stem}-calltree.png"), full_page=True)
    # inverted: the functions with the most self time first (compare with profkit report)
    page.goto(target + "?invertCallstack")
    page.wait_for_timeout(3000)
    result["inverted"] = [r.inner_text().replace("\n", " | ") for r in rows.all()[:8]]
    page.screenshot(path=str(shots / f"{stem}-inverted.png"), full_page=True)
    for tab in ("stack-chart", "marker-chart"):
        page.goto(target.replace("/calltree/", f"/{tab}/"))
        page.wait_for_timeout(3000)
        page.screenshot(path=str(shots / f"{stem}-{tab}.png"), full_page=True)
    markers = page.locator(".markerChartCanvas, .chartViewportEmpty").count()
    result["marker_chart_elements"] = markers
    return result


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiler", default="http://localhost:4243", help="the built profiler")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--shots", type=Path, default=Path("ffp-shots"))
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.shots.mkdir(parents=True, exist_ok=True)
    bad = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=FLAGS, headless=True)
        for path in args.files:
            server, base = serve(path.resolve().parent)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                stem = path.name.removesuffix(".json").removesuffix(".gecko")
                result = check(
                    page, args.profiler.rstrip("/"), f"{base}/{path.name}", args.shots, stem
                )
                page.close()
            finally:
                server.shutdown()
            bad += bool(result["errors"] or not result["calltree"])
            print(json.dumps(result, indent=1, ensure_ascii=False))
        browser.close()
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    sys.exit(main(sys.argv[1:]))
