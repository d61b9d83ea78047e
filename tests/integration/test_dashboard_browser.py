"""The dashboard in a real headless Chromium (Debian's `chromium`, driven by Playwright), against
`fixgraph serve` started as a process: ask a question and watch tokens arrive, open a citation and
see its span highlighted, switch tabs. The second test takes the README's screenshot on GNOME Help
with the real 0.5B model."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from omegaconf import DictConfig, OmegaConf

from tests.conftest import REPO

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REPLY = {
    "abstain": False,
    "sentences": [
        {"text": "Move the hub closer to the router and try again.", "citations": [1]},
        {"text": "If the light stays amber, reset the hub.", "citations": [2]},
    ],
}


@contextmanager
def fixgraph_serve(cfg: DictConfig, folder: Path, timeout_s: float = 600) -> Iterator[str]:
    """`fixgraph serve --params <cfg>` as a process on a free port; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    params = folder / "serve-params.yaml"
    OmegaConf.save(cfg, params, resolve=True)
    log = open(folder / "serve.log", "wb")  # noqa: SIM115
    cmd = [sys.executable, "-m", "fixgraph.cli", "serve", "--params", str(params), f"serve.port={port}"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ), cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            assert proc.poll() is None, (folder / "serve.log").read_text()[-3000:]
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "fixgraph serve did not start"
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def test_dashboard_streams_cites_highlights_and_switches_tabs(
    fixture_config: Any, browser: Any, tmp_path: Path
) -> None:
    from fixgraph.pipeline import graph as graph_stage

    cfg = fixture_config(["tracking.enabled=false", "llm.token_delay_s=0.05"])
    cfg.llm.responses = {"using ONLY the numbered sources": REPLY}
    graph_stage.build(cfg, track=False)
    with fixgraph_serve(cfg, tmp_path) as base:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base)
        page.wait_for_function("document.querySelector('#ask-system').options.length === 3")
        page.fill("#question", "status light blinking amber, hub won't get online")
        page.click("#ask-button")
        # tokens arrive while the answer is still being generated (the progress line is still running)
        page.wait_for_function(
            "Number(document.querySelector('#answer').dataset.tokens || 0) >= 2"
            " && document.querySelector('#ask-progress').classList.contains('running')"
        )
        assert "generating" in page.inner_text("#ask-progress")
        page.wait_for_selector("#ask-progress.done", timeout=30_000)
        assert page.inner_text("#answer").startswith("Move the hub closer to the router and try again.")
        citations = page.locator("#answer a.cite")
        assert citations.count() == 2
        # the citation opens its document with the cited span highlighted
        answer = httpx.post(f"{base}/ask", json={"question": "status light blinking amber, hub won't get online"})
        first = answer.json()["sentences"][0]["citations"][0]
        citations.first.click()
        page.wait_for_selector("#doc-viewer:not([hidden]) mark#highlight")
        assert page.inner_text("#doc-title") == first["title"]
        assert page.inner_text("mark#highlight") == first["quote"]
        assert page.locator("mark#highlight").is_visible()

        page.click("button[data-tab=diagnose]")
        assert page.locator("#tab-diagnose").is_visible() and not page.locator("#tab-ask").is_visible()
        page.fill("#log", "Dec 01 09:00:00 host hubd[42]: error: status light blinks amber, hub cannot reach router")
        page.uncheck("#diagnose-explain")
        page.click("#diagnose-button")
        page.wait_for_selector("#causes li")
        assert "The hub does not connect to Wi-Fi" in page.inner_text("#causes li >> nth=0")

        page.click("button[data-tab=compare]")
        page.select_option("#compare-qid", "t-2")
        page.click("#compare-button")
        page.wait_for_selector("#compare-result h3")
        assert page.locator("#compare-result h3").count() == 2
        assert "gold at rank" in page.inner_text("#compare-result")

        page.click("button[data-tab=graph]")
        page.wait_for_selector("#graph-svg circle")
        page.locator("#graph-svg circle").first.click()
        page.wait_for_selector("#graph-detail h3")

        page.click("button[data-tab=runs]")
        page.wait_for_function("document.querySelector('#run-detail').textContent.length > 0")
        assert "No evaluation runs" in page.inner_text("#run-detail")  # tracking is off here
        assert errors == []  # no script error anywhere on the way


def test_readme_screenshot_with_the_real_model(browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's screenshot: GNOME Help, the hybrid system, Qwen2.5-Coder-0.5B answering live. Written to
    FIXGRAPH_SCREENSHOT when set (FIXGRAPH_SCREENSHOT=docs/images/dashboard.png refreshes the README's), else
    under tmp_path: a test run leaves the working tree as it was."""
    from fixgraph.config import compose

    if not (REPO / "data" / "gnome_help").exists():
        pytest.skip("GNOME Help is not fetched (fixgraph fetch)")
    if not list((REPO / "models").glob("qwen2.5-coder-0.5b*.gguf")):
        pytest.skip("the 0.5B GGUF is not assembled (make llm)")
    pytest.importorskip("llama_cpp")
    monkeypatch.chdir(REPO)
    cfg = compose(["llm=qwen_coder_05b", "llm.cache.enabled=false", "tracking.enabled=false", "serve.verify=false"])
    with fixgraph_serve(cfg, tmp_path) as base:
        # the first answer loads the model: do it before the one shown
        httpx.post(f"{base}/ask", json={"question": "How do I connect to a wireless network?"}, timeout=600)
        page = browser.new_page(viewport={"width": 1500, "height": 950})
        page.goto(base)
        page.wait_for_function("document.querySelector('#ask-system').options.length > 0")
        page.fill("#question", "My wireless keeps disconnecting, what can I do?")
        page.click("#ask-button")
        page.wait_for_function("Number(document.querySelector('#answer').dataset.tokens || 0) >= 1", timeout=300_000)
        page.wait_for_selector("#ask-progress.done, #ask-progress.error", timeout=300_000)
        assert "error" not in page.get_attribute("#ask-progress", "class")
        cites = page.locator("#answer a.cite")
        if cites.count():
            cites.first.click()
            page.wait_for_selector("mark#highlight")
        out = (
            REPO / os.environ["FIXGRAPH_SCREENSHOT"]
            if "FIXGRAPH_SCREENSHOT" in os.environ
            else tmp_path / "dashboard.png"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out))
        assert out.stat().st_size > 10_000
