"""Step round trip from the /web page: a click on a legal action to the rendered observation.

``python -m bench.web [--quick] [--json] [--clicks N]``

``openenv serve grid_world`` runs in its own process on 127.0.0.1 (a free port); Debian's headless
Chromium (``/usr/bin/chromium``, driven by Playwright; no browser is downloaded) opens ``/web``
and clicks legal actions. Each sample is measured inside the page: ``performance.now()`` just
before the button's ``click()`` and again when the observation's text node has been rewritten
(a ``MutationObserver`` on ``#obs-text``), so it covers the page's fetch to ``/web/api/step``, the
server's step, JSON decode and the DOM update — not Playwright's own round trip. Episodes are
reset with the page's Reset button when they end (not timed). Reports p50/p90/max in ms; no goal
is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

__all__ = ["main", "round_trips"]

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

_TIMED_CLICK = """async () => {
  const buttons = [...document.querySelectorAll('#legal-buttons button')];
  if (!buttons.length) return null;
  const target = document.querySelector('#obs-text');
  const done = new Promise((resolve) => {
    const mo = new MutationObserver(() => { mo.disconnect(); resolve(performance.now()); });
    mo.observe(target, { childList: true, characterData: true, subtree: true });
  });
  const t0 = performance.now();
  buttons[0].click();
  return (await done) - t0;
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _server(env: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "openenv", "serve", env, "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"openenv serve {env} exited: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"openenv serve {env} did not answer /health in 30 s") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def round_trips(*, clicks: int, env: str = "grid_world") -> list[float]:
    """``clicks`` timed click → rendered-observation samples (ms), measured in the page."""
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("OPENENV_CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(chromium):
        raise RuntimeError(f"No Chromium at {chromium}: run `bash .ci/browser-setup.sh`.")
    samples: list[float] = []
    with _server(env) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(url + "/web")
            page.wait_for_selector("body[data-ready='1']", timeout=15_000)
            attempts = 0
            while len(samples) < clicks and attempts < clicks * 3:  # bounded even if resets fail
                attempts += 1
                took = page.evaluate(_TIMED_CLICK)
                if took is None:  # episode over: reset (untimed) and wait for the new legal actions
                    page.click("#reset")
                    page.wait_for_selector("#legal-buttons button", timeout=10_000)
                    continue
                samples.append(float(took))
                page.wait_for_function("() => !document.querySelector('#step').disabled")
        finally:
            browser.close()
    return samples


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 clicks instead of 200.")
    parser.add_argument("--clicks", type=int, default=None, help="Timed clicks (bounded at 2,000).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args(argv)
    clicks = min(args.clicks or (30 if args.quick else 200), 2000)
    samples = round_trips(clicks=clicks)
    doc: dict[str, Any] = {
        "benchmark": "web_step_round_trip", "env": "grid_world", "clicks": len(samples),
        "p50_ms": round(statistics.median(samples), 3), "p90_ms": round(_pct(samples, 0.9), 3),
        "max_ms": round(max(samples), 3),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"/web step round trip (click → rendered observation), grid_world, {doc['clicks']} clicks: "
              f"p50 {doc['p50_ms']:.2f} ms  p90 {doc['p90_ms']:.2f} ms  max {doc['max_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
