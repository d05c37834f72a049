"""The docs site builds with zero warnings and renders in a real browser.

`mkdocs build --strict` (hack/mkdocs.yml) fails on a broken link, a missing anchor or a
page the nav names that does not exist. The built site is then served on loopback and
opened in headless Chromium (Debian's `chromium`) through the DevTools protocol: the
navigation lists every page of hack/mkdocs.yml's nav and each of its links is served,
the generated reference pages render their tables, and every image on the benchmark pages
loads and decodes. Nothing is fetched from the network: the site uses no web fonts.

Without Chromium the browser test skips, which fails hack/test.sh's full runs
(INFERFLEET_NO_SKIPS=1): `WITH_TESTS=1 hack/setup.sh` installs it when run as root.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT

CONFIG = REPO_ROOT / "hack" / "mkdocs.yml"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
GENERATED = {
    "reference/api.html": ("InferenceService API", "spec.tiers[].gpu"),
    "reference/conditions.html": ("Conditions, reasons and Events", "NoFeasibleTier"),
    "reference/settings.html": ("Operator settings", "INFERFLEET_PROMETHEUS_URL"),
    "reference/helm-values.html": ("Helm values", "prometheus.url"),
    "reference/cli.html": ("CLI: inferfleet", "inferfleet plan"),
    "reference/metrics.html": ("Metrics and alerts", "inferfleet_reconcile_total"),
    "operations/troubleshooting.html": ("Troubleshooting", "ObjectConflict"),
}
PAGES_WITH_IMAGES = ("benchmarks/autoscaler.html",)
# What the page reports about itself once loaded: read in the page, by the browser.
PAGE_FACTS = """JSON.stringify({
  title: (document.querySelector("article h1") || {}).textContent || "",
  nav: Array.from(document.querySelectorAll("nav.md-nav--primary a.md-nav__link[href]"))
    .map(a => a.href),
  sections: Array.from(document.querySelectorAll(
    "nav.md-nav--primary .md-nav__item--section > .md-nav__link")).map(l => l.textContent.trim()),
  tables: document.querySelectorAll("article table").length,
  text: document.querySelector("article") ? document.querySelector("article").innerText : "",
  images: Array.from(document.querySelectorAll("article img"))
    .map(i => ({src: i.src, complete: i.complete, width: i.naturalWidth})),
  styled: getComputedStyle(document.querySelector(".md-header")).position
})"""


def build(site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "--site-dir", str(site)],
        cwd=REPO_ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="inferfleet-docs-") as directory:
        target = Path(directory) / "site"
        done = build(target)
        assert done.returncode == 0, done.stdout + done.stderr
        warnings = [line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line]
        assert warnings == []
        yield target


def nav_pages() -> list[str]:
    """Every page hack/mkdocs.yml's nav names, as built (.html, no directory URLs)."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            found.append(node.removesuffix(".md") + ".html")
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(config["nav"])
    return found


def test_the_site_builds_strict_with_every_nav_page(site: Path) -> None:
    for page in nav_pages():
        assert (site / page).is_file(), page
    for page in GENERATED:
        assert page in nav_pages(), page


# ---------------------------------------------------------------- the browser


class _Quiet(http.server.SimpleHTTPRequestHandler):
    served: list[tuple[str, int]]

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.served.append((self.path, int(code) if str(code).isdigit() else 0))

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[tuple[str, list[tuple[str, int]]]]:
    requests: list[tuple[str, int]] = []
    handler = functools.partial(type("Handler", (_Quiet,), {"served": requests}), directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", requests
    finally:
        server.shutdown()
        server.server_close()


def failures(requests: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Requests the server answered with an error (a 304 is the browser's cache at work)."""
    return [(path, code) for path, code in requests if not 200 <= code < 400]


def chromium_path() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


class Browser:
    """One headless Chromium, driven over the DevTools protocol."""

    def __init__(self, executable: str, profile: Path) -> None:
        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or len(port_file.read_text().splitlines()) < 2:
            assert self.process.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium opened no DevTools port"
            time.sleep(0.1)
        self.port = int(port_file.read_text().splitlines()[0])
        self._id = 0

    def open(self, url: str) -> dict[str, Any]:
        """Load `url` in a new tab, wait for its load event, and return PAGE_FACTS."""
        import websocket

        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as answer:
            target = json.load(answer)
        connection = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60)
        try:
            self._call(connection, "Page.enable")
            self._call(connection, "Page.navigate", {"url": url})
            self._wait(connection, "Page.loadEventFired")
            result = self._call(
                connection, "Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True}
            )
            facts: dict[str, Any] = json.loads(result["result"]["value"])
            return facts
        finally:
            connection.close()
            urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/json/close/{target['id']}", timeout=30
            ).close()

    def _call(self, connection: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        connection.send(json.dumps({"id": self._id, "method": method, "params": params or {}}))
        while True:
            message = json.loads(connection.recv())
            if message.get("id") == self._id:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    def _wait(self, connection: Any, event: str) -> None:
        while json.loads(connection.recv()).get("method") != event:
            pass

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    executable = chromium_path()
    if executable is None:
        pytest.skip(
            "chromium not found: install Debian's chromium package (WITH_TESTS=1 hack/setup.sh as root)"
        )
    opened = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield opened
    finally:
        opened.close()


def test_the_home_page_renders_with_the_whole_navigation(
    browser: Browser, served: tuple[str, list[tuple[str, int]]]
) -> None:
    base, requests = served
    facts = browser.open(base + "index.html")
    assert facts["title"].replace("¶", "").strip() == "inferfleet"
    assert facts["styled"] in ("sticky", "fixed"), "the theme's stylesheet did not apply"
    assert {"Getting started", "Concepts", "Operations", "Reference", "Benchmarks", "Contributing"} <= set(
        facts["sections"]
    )
    linked = {link.removeprefix(base).split("#")[0] for link in facts["nav"]}
    assert set(nav_pages()) <= linked
    for page in sorted(linked):
        with urllib.request.urlopen(base + page, timeout=30) as answer:
            assert answer.status == 200, page
    assert failures(requests) == []


@pytest.mark.parametrize("page", sorted(GENERATED))
def test_a_generated_reference_page_renders(
    browser: Browser, served: tuple[str, list[tuple[str, int]]], page: str
) -> None:
    base, requests = served
    title, expected = GENERATED[page]
    facts = browser.open(base + page)
    assert facts["title"].replace("¶", "").strip() == title
    assert facts["tables"] >= 1
    assert expected in facts["text"]
    assert failures(requests) == []


@pytest.mark.parametrize("page", PAGES_WITH_IMAGES)
def test_the_benchmark_images_load(
    browser: Browser, served: tuple[str, list[tuple[str, int]]], page: str
) -> None:
    base, requests = served
    facts = browser.open(base + page)
    assert facts["images"], f"{page} shows no image"
    for image in facts["images"]:
        assert image["complete"] and image["width"] > 0, image
    assert failures(requests) == []
