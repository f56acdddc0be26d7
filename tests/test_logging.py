"""The library logs and never prints; the commands show its log lines as they always printed them.

Each case runs in a fresh interpreter: logging is process-wide state, which the rest of the suite sets
up the commands' way (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

# A data build (its statistics table and "wrote ..." line are INFO) and the repair of a torn scores file
# (a WARNING), as a library user would call them; argv: annotations, output folder, scores file.
WORK = """
import sys
from judge.data.build import build_sft_dataset
from judge.data.config import DataConfig, DataSections
from judge.scoring.output import read_records

annotations, out, scores = sys.argv[1:4]
build_sft_dataset(DataSections(data=DataConfig(annotations=[annotations]), output_dir=out), None, progress=False)
read_records(scores, repair=True)
"""

AS_A_LIBRARY = (
    """
import logging
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append((record.name, record.levelname))
logging.getLogger().addHandler(Keep())
logging.getLogger().setLevel(logging.INFO)
"""
    + WORK
    + """
print(sorted(set(seen)), file=sys.stderr)
"""
)

AS_THE_COMMANDS = (
    """
from judge.cli._logging import setup_logging
setup_logging()
setup_logging()  # every command's main calls it; a second call must not print each line twice
"""
    + WORK
)


def _run(code: str, small_demo, tmp_path) -> subprocess.CompletedProcess:
    scores = tmp_path / "scores.jsonl"
    scores.write_text('{"id": "a", "metric": "judge"}\n{"id": "b", "met', encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = [str(small_demo), str(tmp_path / "run"), str(scores)]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_the_library_prints_nothing_and_logs_to_its_module_loggers(small_demo, tmp_path):
    proc = _run(AS_A_LIBRARY, small_demo, tmp_path)
    assert proc.stdout == ""
    # What a user's own logging configuration receives: progress at INFO, the repair at WARNING, each
    # from the module that did the work.
    assert "('judge.data.build', 'INFO')" in proc.stderr
    assert "('judge.scoring.output', 'WARNING')" in proc.stderr


def test_the_commands_print_info_on_stdout_and_warnings_on_stderr(small_demo, tmp_path):
    proc = _run(AS_THE_COMMANDS, small_demo, tmp_path)
    out_lines = proc.stdout.splitlines()
    assert out_lines[0].startswith("rubric hash ") and "train score histogram:" in proc.stdout
    assert sum(line.startswith("wrote ") for line in out_lines) == 1
    assert "torn last line" not in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "torn last line" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {tmp_path / 'scores.jsonl'}: dropped")
