"""What tests/conftest.py promises the suite under pytest-xdist (CONTRIBUTING.md): each test file runs whole
on one worker, and a fixture built through ``built_once`` is built once per run, its value shared by the
workers. Checked on a throwaway suite that uses the project's own conftest, run with ``-n 2``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

FIXTURE = """

@pytest.fixture(scope="session")
def counted(tmp_path_factory):
    def build(folder):
        with open(os.environ["PROBE_OUT"] + "/builds.txt", "a") as f:
            f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")
        (folder / "made.txt").write_text("x")
        return str(folder)

    return built_once(tmp_path_factory, "counted", build)
"""

TEST_FILE = """
import os, time

def record(name, value):
    with open(os.environ["PROBE_OUT"] + "/runs.txt", "a") as f:
        f.write(f"{{__name__}} {{name}} {{os.environ['PYTEST_XDIST_WORKER']}} {{value}}\\n")

{tests}
"""


@pytest.mark.slow  # two worker processes
def test_files_stay_whole_on_one_worker_and_built_once_builds_once(tmp_path):
    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    shutil.copy(CONFTEST, suite / "conftest.py")
    with open(suite / "conftest.py", "a") as f:
        f.write(FIXTURE)
    for name in ("alpha", "beta", "gamma"):
        tests = "\n".join(
            f"def test_{i}(counted):\n    time.sleep(0.2)\n    record({i}, counted)\n" for i in range(4)
        )
        (suite / f"test_{name}.py").write_text(TEST_FILE.format(tests=tests))
    got = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "--rootdir", str(suite),
         str(suite)],
        cwd=suite, capture_output=True, text=True, timeout=300,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}, "PROBE_OUT": str(out)},
    )  # fmt: skip
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    runs = [line.split() for line in (out / "runs.txt").read_text().splitlines()]
    assert len(runs) == 12
    workers = {}
    for module, _, worker, _ in runs:
        workers.setdefault(module, set()).add(worker)
    assert all(len(w) == 1 for w in workers.values()), workers  # each file whole on one worker
    assert len(set().union(*workers.values())) == 2, workers  # and both workers used
    assert len((out / "builds.txt").read_text().splitlines()) == 1  # built once in the run
    assert len({value for *_, value in runs}) == 1  # every test saw the one value
