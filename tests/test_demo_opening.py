"""The demo's opening lines (scripts/demo.py's ``opening``): a --quick run is not told to run --quick and is told
what it gives; a busy machine is told to expect longer. Fast: the text only, the demo itself is not run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _demo():
    spec = importlib.util.spec_from_file_location("demo_script_opening", ROOT / "scripts" / "demo.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_quick_run_is_not_advised_to_run_quick_and_is_told_its_verdicts_may_differ():
    demo = _demo()
    text = demo.opening(demo.QUICK_STEPS, quick=True, busy=False)
    assert "Shorter" not in text and "scripts/demo.sh --quick" not in text, text
    assert f"trains {demo.QUICK_STEPS} steps" in text and "verdicts may differ" in text, text
    assert "busy" not in text


def test_the_full_demo_still_offers_quick_and_says_what_it_costs():
    demo = _demo()
    text = demo.opening(None, quick=False, busy=False)
    assert f"trains {demo.DEMO_STEPS} steps" in text
    assert "Shorter: bash scripts/demo.sh --quick" in text and "verdicts may differ" in text, text
    # A run already shorter than --quick is not told that --quick is shorter.
    assert "Shorter" not in demo.opening(4, quick=False, busy=False)


def test_a_busy_machine_is_told_to_expect_longer():
    demo = _demo()
    quiet = demo.opening(demo.QUICK_STEPS, quick=True, busy=False)
    busy = demo.opening(demo.QUICK_STEPS, quick=True, busy=True)
    assert "This machine is busy: expect several times that" in busy and busy.startswith(
        quiet.split(" s on")[0]
    )


def test_demo_sh_tells_demo_py_that_the_machine_is_busy():
    """scripts/demo.sh exports the variable demo.py reads when it detects the load (checked on the script's
    text: making this machine busy on purpose would slow every other job on it)."""
    demo = _demo()
    sh = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    assert f"export {demo.BUSY_ENV}=1" in sh
    # demo.py's parser still refuses --quick with --steps (the shell passes its arguments through).
    got = subprocess.run(
        ["python3", str(ROOT / "scripts" / "demo.py"), "--quick", "--steps", "5"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert got.returncode == 2 and "not allowed with argument" in got.stderr
