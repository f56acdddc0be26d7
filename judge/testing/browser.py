"""The headless browser the judge-view tests and ``scripts/bench_view.py`` drive: Debian's chromium (never a
browser Playwright downloads), started with these switches (no sandbox: CI runs as root; nothing fetched
from the network while it runs)."""

from __future__ import annotations

from pathlib import Path

#: Debian's ``chromium`` package (``apt-get install -y chromium``; ``.ci/run`` installs it)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def wait_for(page, expression: str, timeout_s: float = 30.0) -> None:
    """Wait until the JavaScript ``expression`` is truthy in the Playwright ``page``, checked from Python
    every 50 ms (``page.evaluate``). Not Playwright's ``wait_for_function``: when its first check is false it
    polls inside the page with ``eval``, which judge-view's Content-Security-Policy (``script-src 'self'``)
    refuses, so it failed whenever the page was slower than that first check."""
    import time

    deadline = time.monotonic() + timeout_s
    while not page.evaluate(f"!!({expression})"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{expression!r} still false after {timeout_s:g} s")
        time.sleep(0.05)
