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
