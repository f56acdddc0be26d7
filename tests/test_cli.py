import json
import subprocess
import sys

from judge.cli import data_main


def test_build_command_end_to_end(tmp_path, small_demo, capsys):
    out = tmp_path / "sft"
    code = data_main(["build", "--config", "rubric6.yaml", "--set", f"data.annotations=[{small_demo}]",
                      "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "tokens/ex" in printed and "train score histogram" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["train"] > 0 and manifest["processor"]


def test_build_bad_config_exits_2_with_message(tmp_path, capsys):
    assert data_main(["build", "--config", "rubric6.yaml", "--set", "data.target=essay"]) == 2
    err = capsys.readouterr().err
    assert "data.target" in err and "essay" in err


def test_console_entry_point_runs():
    # The module form of the console script, in a fresh interpreter (what a user's shell runs).
    proc = subprocess.run([sys.executable, "-m", "judge.cli", "rubric", "show", "mmie"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Rubric mmie")
