"""The settings of one scoring run (``judge-score``): :class:`ScoreConfig`.

One name and one default per setting. The command's options are generated from these fields
(``judge/cli/score.py``): a field ``batch_tokens`` is the flag ``--batch-tokens``, its description
the help text, a ``Literal`` its choices. A description or an error names another setting as
`field` in backticks; the command shows it as that setting's flag.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from judge.core.settings import PathText, Settings
from judge.eval.ppi import MIN_LABELS
from judge.models import BATCH_TOKENS
from judge.scoring.inputs import check_format

#: The settings of the scoring engine itself (how it batches, shares prefixes and reads out), beside the
#: judge it loads: ``Judge.load`` takes these as keywords, and ``judge-score --server`` ignores them.
ENGINE_SETTINGS = (
    "batch_tokens",
    "batch_size",
    "share_prefix",
    "packed",
    "reproducible",
    "max_tokens",
    "max_new_tokens",
    "chunk_size",
    "workers",
)


class ScoreConfig(Settings):
    """Every setting of ``judge-score``; the CLI fills it from its options, a library user by keywords:
    ``ScoreConfig(inputs=["preds.jsonl"], judge="runs/demo/judge")``. A bad value is a ConfigError
    naming the field."""

    inputs: list[PathText] = Field(
        min_length=1,
        description="prediction files (canonical JSONL, MMIE JSON, MileBench pred.json, "
        "MMRA rows) or annotation files (records with human 'scores')",
    )
    judge: PathText | None = Field(
        None,
        description="a judge folder (with judge_card.json), or a plain model folder / hub id / "
        "'tiny' together with `rubric`",
    )
    rubric: PathText | None = Field(
        None,
        description="rubric name in rubrics/ or a YAML path (default: the one the judge card names; with "
        "`server` the server's, which a given one must equal; mmie without a judge)",
    )
    server: str | None = Field(
        None,
        description="score with a running judge-serve at this URL (http://host:8000) instead of loading a "
        "judge here: its judge and rubric score, the rest of the run is as with `judge` (API key: the "
        "JUDGE_API_KEY environment variable)",
        json_schema_extra={"metavar": "URL"},
    )
    server_concurrency: int = Field(
        4,
        ge=1,
        description="requests in flight at once to `server` (default 4; more keep more replicas behind a "
        "load balancer busy)",
    )
    criteria: list[str] | None = Field(
        None,
        description="score only these criteria, and overall (repeatable; default: those the judge was trained "
        "on, as its card's data.criteria says, else every criterion of each item's family)",
        json_schema_extra={"metavar": "CRITERION"},
    )
    force: bool = Field(False, description="score even when the rubric's hash differs from the judge card's")
    calibration: bool = Field(
        True,
        description="apply the calibration the judge card names (judge-calibrate): `score` is then the "
        "calibrated score, beside `raw_score` and a conformal `interval` (off: the raw read-out)",
        json_schema_extra={
            "flag": "--no-calibration",
            "flag_help": "score with the raw read-out even when the judge card names a calibration",
        },
    )
    out: PathText = Field("runs/score", description="output folder (default runs/score)")
    overwrite: bool = Field(False, description="start afresh in `out` instead of resuming")
    skip_invalid: bool = Field(
        False, description="skip invalid records (listed in the summary) instead of stopping"
    )
    # Not a Literal: a benchmark plugin adds its format (the command reads the choices from the registry).
    format: str = Field("auto", description="input format (default auto: detected per file)")
    dataset_file: PathText | None = Field(
        None, description="MileBench dataset file <ds>.json (or a folder of them) for pred.json inputs"
    )
    root: PathText | None = Field(
        None, description="resolve relative image paths from this folder instead of each file's folder"
    )
    metric_mode: Literal["official", "strict", "both"] = Field(
        "both",
        description="rule-based metrics: the benchmark's own scoring, the toolkit's fixed extraction, or "
        "both (default)",
    )
    no_judge: bool = Field(
        False, description="rule-based metrics only; items that need the judge are counted as not scored"
    )
    rationale: bool = Field(
        False,
        description="let the judge write a rationale before its score (one "
        "prompt at a time; the score is still read from the distribution)",
    )
    max_new_tokens: int = Field(256, ge=1, description="rationale length limit (default 256)")
    device: str = Field("auto", description="cpu, cuda, cuda:1, ... (default auto: CUDA when available)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype (auto: bfloat16 on GPU, float32 on CPU)"
    )
    quantization: Literal["card", "none", "4bit", "8bit"] = Field(
        "card",
        description="how to load the judge's base: card (default: as the judge was trained, so a QLoRA judge "
        "is scored on its 4-bit base), none, 4bit or 8bit (bitsandbytes); overriding the card warns",
    )
    batch_tokens: int = Field(
        BATCH_TOKENS,
        ge=1,
        description=f"tokens per forward pass, padding included (default {BATCH_TOKENS})",
    )
    batch_size: int = Field(
        16,
        ge=1,
        description="responses (each with all its criterion prompts) per forward pass, at most (default 16)",
    )
    share_prefix: bool = Field(
        True,
        description="compute each response's shared prefix once for all its criterion prompts (off: run "
        "every criterion prompt in full)",
        json_schema_extra={
            "flag": "--no-share-prefix",
            "flag_help": "run every criterion prompt in full instead of computing the response's shared "
            "prefix once",
        },
    )
    packed: Literal["auto", "flex", "off"] = Field(
        "auto",
        description="how a shared prefix runs: flex, each forward batch as one packed row under a prefix-tree "
        "attention mask (FlexAttention: no KV-cache copies, no padding); off, each criterion's suffix on a copy "
        "of the prefix's KV cache; auto (default), flex on a CUDA GPU, off elsewhere. The scores agree to "
        "rounding",
    )
    reproducible: bool = Field(
        False,
        description="make each item's scores depend on that item alone, bit for bit, whatever it is batched "
        "with (any `batch_size`, `batch_tokens` or shard count; judge-serve gives the same): each item runs "
        "in forward passes of its own, every criterion of its family; slower than batching items together",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="context budget of one prompt; longer items get fewer image "
        "tiles, then are unscorable (default: the model's max positions, else 32768)",
    )
    limit: int | None = Field(None, ge=1, description="score only the first N records (in input order)")
    baseline: Literal["clipscore"] | None = Field(
        None, description="also write a baseline's scores (CLIPScore)"
    )
    clip_model: PathText | None = Field(
        None, description="CLIP model folder, hub id or 'tiny' for `baseline` clipscore"
    )
    labels: list[PathText] = Field(
        [],
        description="human labels for some of the scored responses (annotation files, matched by model and "
        "id): the leaderboard then sets each model's prediction-powered mean (PPI++) beside the judge-only "
        "and human-only means, and ranks and win rates follow it. The labelled responses must be a random "
        "sample (judge-data sample draws one)",
        json_schema_extra={"metavar": "FILE"},
    )
    min_labels: int = Field(
        MIN_LABELS,
        ge=2,
        description="labelled questions a human-only or prediction-powered mean (and a PPI win rate) needs; "
        f"below it the estimate is left empty with the reason, and the board is ranked by the judge (default {MIN_LABELS})",
        json_schema_extra={"metavar": "N"},
    )
    leaderboard_resamples: int = Field(
        1000,
        ge=1,
        description="bootstrap resamples (questions drawn with replacement) for the leaderboard's "
        "intervals of each model's mean and rank and of the win rates (default 1000)",
    )
    leaderboard_seed: int = Field(
        0,
        ge=0,
        description="seed of the leaderboard's resamples (default 0): the same seed gives the same intervals",
    )
    chunk_size: int = Field(
        256,
        ge=1,
        description="records encoded at a time (their images' pixels are held until scored)",
        json_schema_extra={"flag": None},
    )
    workers: int = Field(
        0,
        ge=0,
        description="processes that encode the next items (images, prompts) while the judge scores, so "
        "that a GPU does not wait for the CPU; the scores are the same bit for bit (default 0: encode in "
        "this process; not used with `rationale`)",
    )
    progress: bool = Field(
        True,
        description="show a progress bar",
        json_schema_extra={"flag": "--no-progress", "flag_help": "no progress bar"},
    )

    _known_format = field_validator("format")(check_format)

    @model_validator(mode="after")
    def _consistent(self) -> ScoreConfig:
        if self.no_judge and self.judge:
            raise ValueError("`no_judge` and `judge` exclude each other")
        if self.server is not None:
            if not self.server.startswith(("http://", "https://")):
                raise ValueError(f"`server` {self.server!r} must be a URL starting with http:// or https://")
            if self.judge:
                raise ValueError("`server` and `judge` exclude each other: the server's judge scores")
            if self.no_judge:
                raise ValueError("`server` and `no_judge` exclude each other")
            if self.rationale:
                raise ValueError(
                    "`rationale` is not available with `server` (judge-serve reads the score at once)"
                )
        if self.baseline == "clipscore" and not self.clip_model:
            raise ValueError("`baseline` clipscore needs `clip_model` PATH (or tiny)")
        return self


def engine_keywords(cfg: ScoreConfig) -> dict[str, Any]:
    """The ``JudgeEngine`` keywords a :class:`ScoreConfig` holds: its :data:`ENGINE_SETTINGS` and
    ``rationale``. The one place that maps the one onto the other (``Judge.load``, ``judge-score``)."""
    return {name: getattr(cfg, name) for name in ENGINE_SETTINGS} | {"rationale": cfg.rationale}


__all__ = ["ScoreConfig"]
