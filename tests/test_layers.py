"""The package's shape: the import contracts in pyproject.toml hold, and the bottom layer stays light."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports")
    assert exe, "import-linter is a dev dependency: pip install -e '.[dev]'"
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_reading_files_does_not_import_the_model_stack():
    # Checking records and rubrics must stay fast and work where torch is not installed.
    code = (
        "import sys, judge, judge.core, judge.data.validate, judge.benchmarks;"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
