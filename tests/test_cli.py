import json
import subprocess
import sys

from judge.cli import data_main
from judge.cli.train import main as train_main


def test_build_command_end_to_end(tmp_path, small_demo, capsys):
    out = tmp_path / "sft"
    code = data_main(
        ["build", "--config", "demo", "--set", f"data.annotations=[{small_demo}]", "--out", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "tokens/ex" in printed and "train score histogram" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["train"] > 0 and manifest["processor"]


def test_build_bad_config_exits_2_with_message(tmp_path, capsys):
    assert data_main(["build", "--config", "demo", "--set", "data.target=essay"]) == 2
    err = capsys.readouterr().err
    assert "data.target" in err and "essay" in err


def test_console_entry_point_runs():
    # The module form of the console script, in a fresh interpreter (what a user's shell runs).
    proc = subprocess.run(
        [sys.executable, "-m", "judge.cli", "rubric", "show", "mmie"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Rubric mmie")


def _broken_copy(small_demo):
    """The demo set with a score off the scale on line 5."""
    lines = small_demo.read_text().splitlines()
    bad = json.loads(lines[4])
    bad["scores"]["ann1"]["overall"] = 9
    lines[4] = json.dumps(bad)
    broken = small_demo.parent / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    return broken, lines


def test_build_stops_on_a_bad_record_or_skips_it_when_asked(tmp_path, small_demo, capsys):
    broken, lines = _broken_copy(small_demo)
    args = [
        "build",
        "--config",
        "demo",
        "--set",
        f"data.annotations=[{broken}]",
        "--no-tokens",
        "--out",
        str(tmp_path / "sft"),
    ]
    assert data_main(args) == 2
    err = capsys.readouterr().err
    assert f"{broken}:5" in err and "scores.ann1.overall" in err and "--skip-invalid" in err
    assert not (tmp_path / "sft").exists()  # nothing half-written
    assert data_main(args + ["--skip-invalid"]) == 0
    stats = json.loads((tmp_path / "sft" / "stats.json").read_text())
    assert [s["line"] for s in stats["skipped_records"]] == [5]
    manifest = json.loads((tmp_path / "sft" / "manifest.json").read_text())
    assert sum(manifest["records"].values()) == len(lines) - 1


def test_train_names_the_config_key_that_skips_bad_records(tmp_path, small_demo, capsys):
    # The library names the setting (`skip_invalid`); judge-train, which has no such flag, shows how its
    # run config sets it.
    broken, _ = _broken_copy(small_demo)
    args = ["--config", "demo", "--set", f"data.annotations=[{broken}]", "--set", f"output_dir={tmp_path}"]
    assert train_main(args) == 2
    err = capsys.readouterr().err
    assert f"{broken}:5" in err and "pass --set data.skip_invalid=true to skip" in err
