"""The settings of judge-score and judge-report: validated models that generate the commands' options.

A library user builds them with keywords and reads errors that name fields (`limit`); the command reads
the same errors with its flags (--limit). One name and one default per setting: the options parsed from
an empty command line are the model's defaults.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.cli._common import flag_names, settings_from, with_flags
from judge.cli.report import build_parser as report_parser
from judge.cli.report import main as report_main
from judge.cli.score import build_parser as score_parser
from judge.cli.score import main as score_main
from judge.core.errors import ConfigError
from judge.eval.config import ReportConfig, ScoreSpec
from judge.models import BATCH_TOKENS
from judge.scoring.config import ScoreConfig


def test_options_parsed_from_an_empty_command_line_are_the_models_defaults():
    assert settings_from(score_parser().parse_args(["p.jsonl"]), ScoreConfig) == ScoreConfig(
        inputs=["p.jsonl"]
    )
    got = settings_from(
        report_parser().parse_args(["--human", "h.jsonl", "--clip-model", "tiny"]), ReportConfig
    )
    assert got == ReportConfig(human=["h.jsonl"], clip_model="tiny")
    assert ScoreConfig(inputs=["p"]).batch_tokens == BATCH_TOKENS
    assert f"(default {BATCH_TOKENS})" in " ".join(score_parser().format_help().split())


def test_every_setting_has_its_flag_and_the_negated_ones_switch_off():
    flags = flag_names(score_parser())
    assert flags["share_prefix"] == "--no-share-prefix" and flags["progress"] == "--no-progress"
    assert flags["no_judge"] == "--no-judge" and flags["batch_tokens"] == "--batch-tokens"
    # every setting is on the command line, except the one a library user alone tunes
    assert set(ScoreConfig.model_fields) - set(flags) == {"inputs", "chunk_size"}
    args = score_parser().parse_args(["p.jsonl", "--no-share-prefix", "--no-progress", "--limit", "3"])
    cfg = settings_from(args, ScoreConfig)
    assert (cfg.share_prefix, cfg.progress, cfg.limit) == (False, False, 3)

    rflags = flag_names(report_parser())
    assert rflags["criteria"] == "--criterion" and rflags["on_scale"] == "--on-scale"
    assert set(ReportConfig.model_fields) - set(rflags) == {"clip_batch_size"}
    args = report_parser().parse_args(["--human", "h", "--scores", "a=s.jsonl", "--criterion", "overall"])
    assert settings_from(args, ReportConfig).scores == [ScoreSpec("a", "s.jsonl")]


def test_help_names_other_settings_by_their_flags():
    help_text = " ".join(score_parser().format_help().split())  # unwrapped
    assert "together with --rubric" in help_text and "instead of computing the response's shared" in help_text
    assert "`" not in help_text
    assert "`" not in report_parser().format_help()


@pytest.mark.parametrize(
    "make, library_message, cli_message",
    [
        (
            lambda: ScoreConfig(inputs=["p"], judge="tiny", no_judge=True),
            "`no_judge` and `judge` exclude each other",
            "--no-judge and --judge exclude each other",
        ),
        (
            lambda: ScoreConfig(inputs=["p"], baseline="clipscore"),
            "`baseline` clipscore needs `clip_model` PATH (or tiny)",
            "--baseline clipscore needs --clip-model PATH (or tiny)",
        ),
        (
            lambda: ReportConfig(human=["h"]),
            "nothing to compare: give at least one `scores` NAME=FILE, or `clip_model`",
            "nothing to compare: give at least one --scores NAME=FILE, or --clip-model",
        ),
        (
            lambda: ReportConfig(
                human=["h"], scores=["a=x.jsonl"], clip_model="tiny", on_scale=["a"], bootstrap=0
            ),
            "`bootstrap`: Input should be greater than or equal to 1 (got 0)",
            "--bootstrap: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            lambda: ReportConfig(human=["h"], scores=["=x.jsonl"]),
            "`scores` '=x.jsonl': expected NAME=FILE, e.g. `scores` judge=runs/demo/score/scores.jsonl",
            "--scores '=x.jsonl': expected NAME=FILE, e.g. --scores judge=runs/demo/score/scores.jsonl",
        ),
    ],
)
def test_library_errors_name_fields_the_commands_name_flags(make, library_message, cli_message):
    with pytest.raises(ConfigError) as e:
        make()
    assert str(e.value) == library_message
    parser = (
        report_parser() if "scores" in library_message or "bootstrap" in library_message else score_parser()
    )
    assert with_flags(str(e.value), flag_names(parser)) == cli_message


def test_the_commands_print_the_flag_spelling(tmp_path, capsys):
    assert score_main(["p.jsonl", "--judge", "tiny", "--no-judge", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == "error: --no-judge and --judge exclude each other\n"
    assert report_main(["--human", "h.jsonl", "--scores", "a=x.jsonl", "--scores", "a=y.jsonl"]) == 2
    assert (
        capsys.readouterr().err
        == "error: scorer name(s) used twice: a; give each --scores a different NAME\n"
    )
    assert not (tmp_path / "o").exists()


def test_assignment_is_checked_and_a_refused_value_is_not_kept():
    cfg = ScoreConfig(inputs=[Path("p.jsonl")], out=Path("runs/x"), judge="tiny")
    assert cfg.inputs == ["p.jsonl"] and cfg.out == "runs/x"  # paths are taken, kept as text
    with pytest.raises(ConfigError, match=r"^`limit`: Input should be greater than or equal to 1 \(got 0\)$"):
        cfg.limit = 0
    with pytest.raises(ConfigError, match="`no_judge` and `judge` exclude each other"):
        cfg.no_judge = True
    assert cfg.limit is None and cfg.no_judge is False
    cfg.limit = 2
    assert cfg.limit == 2


def test_unknown_and_missing_settings_are_named():
    with pytest.raises(ConfigError) as e:
        ScoreConfig(inputs=["p"], batch_token=4, format="xml")
    lines = str(e.value).splitlines()
    assert lines[0] == "2 invalid settings:"
    assert lines[1].startswith("  `format` 'xml' is not one of auto, canonical, mmie, milebench, mmra")
    assert lines[2].startswith("  `batch_token` is not a setting; settings: inputs, judge, rubric")
    with pytest.raises(ConfigError, match=r"^`inputs` is required$"):
        ScoreConfig()  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"^no human file: give `human` FILE"):
        ReportConfig(human=[], clip_model="tiny")
