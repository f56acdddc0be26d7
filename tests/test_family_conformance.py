"""What every family of bases must do beside InternVL, each through the path a user runs, on the family's tiny
model; parametrized over :data:`FAMILIES`, so a new family is one more entry there.

1. QLoRA: ``judge-train`` with ``quantization: 4bit`` and ``train.finetune: lora`` on the CPU (bitsandbytes'
   CPU kernels): the language model is 4-bit, the vision tower is not, the adapters move, and the judge folder
   loads back (on its 4-bit base, as the card says) and scores.
2. ``--reproducible``: an item's scores are the same bits alone, together with others, reversed, one response
   per forward pass and at a small token budget, with the shared prefix on and off, through ``Judge.load``
   and ``judge-score``; the default mode is checked to move them, so the check can fail.
3. Calibration: ``judge-calibrate`` on a judge folder of the family writes ``calibration.json``, names it in
   the card, and the folder loads back with it (``judge-score`` then writes the calibrated view).
4. An item whose images take it over the context budget is null with InternVL's reason, word for word.
5. Items with two images between three texts, scored by ``judge-score`` end to end: every image reaches the
   prompt in its place (swapping two images moves the scores), and the scores are the loaded judge's engine's.

InternVL's (``tiny``) own checks of these live elsewhere: QLoRA in tests/test_train_run.py
(test_qlora_4bit_trains_on_cpu), tests/test_train_model.py and tests/test_score_identity.py
(test_a_qlora_judge_is_scored_on_its_4bit_base); reproducible scoring in tests/test_reproducible.py;
calibration in tests/test_calibration_paths.py; the context budget in tests/test_score_engine.py
(test_an_item_whose_images_exceed_the_context_budget_is_refused); multi-image items through judge-score in
tests/test_score_cli.py and tests/test_score_identity.py (the demo's items have up to three images). The LoRA
step, the scoring paths' equality and judge-serve of the Qwen families are in tests/test_family_qwen25vl.py,
tests/test_family_qwen3vl.py and tests/test_family_serve.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from serving import REPO

import judge
from judge.cli.score import main as score_main
from judge.models import families

pytestmark = pytest.mark.usefixtures("one_thread")

#: The tiny model of every family other than InternVL; a new family is one more entry.
FAMILIES = ["tiny-qwen2.5-vl", "tiny-qwen3-vl", "tiny-llava-onevision", "tiny-smolvlm", "tiny-gemma3"]

DEMO = REPO / "annotations" / "demo"
FIELDS = ("id", "task", "question", "response", "reference", "model")
TOL = 1e-4


def demo_items(per_task: int) -> list[dict]:
    """``per_task`` shipped demo records of each task family (every one has images), as prediction items."""
    out: dict[str, list[dict]] = {}
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if len(out.setdefault(rec["task"], [])) < per_task:
            out[rec["task"]].append({**{k: rec[k] for k in FIELDS if k in rec}, "benchmark": "mmie"})
    return [x for group in out.values() for x in group]


def scores_of(records) -> dict[tuple[str, str], float]:
    return {(r.id, r.criterion): r.score for r in records}


def scores_file(out: Path) -> dict[tuple[str, str], dict]:
    recs = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return {(r["id"], r["criterion"]): r for r in recs if r["metric"] == "judge"}


def write_items(folder: Path, items: list[dict]) -> Path:
    """The items in a prediction file beside a copy of the demo's images."""
    if not (folder / "images").exists():
        shutil.copytree(DEMO / "images", folder / "images")
    path = folder / "items.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    return path


# -- 1. QLoRA


@pytest.mark.slow
@pytest.mark.parametrize("tiny_name", FAMILIES)
def test_a_qlora_step_trains_on_a_4bit_base_and_the_folder_loads_back_and_scores(
    tiny_name, small_demo, tmp_path, rubric
):
    from safetensors.torch import load_file

    from judge.train import train_judge

    family = families.by_tiny_name(tiny_name)
    assert family is not None
    out = tmp_path / "run"
    result = train_judge(
        "demo",
        overrides={
            "data.annotations": [str(small_demo)],
            "output_dir": str(out),
            "model.path": tiny_name,
            "quantization": "4bit",
            "train.finetune": "lora",
            "train.max_steps": 2,
            "train.per_device_train_batch_size": 4,
            "train.learning_rate": 1e-2,
            "train.logging_steps": 1,
            "train.warmup_steps": 0,
            "eval.strategy": "no",
            "eval.at_start": False,
        },
    )
    assert result.steps == 2
    card = json.loads((result.judge_dir / "judge_card.json").read_text())
    assert card["quantization"] == "4bit" and card["family"] == family.name
    state = sorted(out.rglob("trainer_state.json"))[-1]
    losses = [h["loss"] for h in json.loads(state.read_text())["log_history"] if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    weights = load_file(str(result.judge_dir / "adapter" / "adapter_model.safetensors"))
    lora_b = [t for k, t in weights.items() if "lora_B" in k]
    assert lora_b and any(float(t.abs().max()) > 0 for t in lora_b)  # B starts at zero: the steps moved it
    assert all(f".{family.language_part}." in k for k in weights if "lora_" in k)

    # The folder alone, on the 4-bit base its card names: the language model's linears are bitsandbytes',
    # the vision tower's (the family's quantization_skip) are not; it scores items with images.
    loaded = judge.models.load(result.judge_dir, progress=False)
    assert loaded.card.family == family.name and loaded.spec.quantization == "4bit"
    kinds = {
        type(m).__module__.split(".")[0]
        for n, m in loaded.model.named_modules()
        if f".{family.language_part}." in f".{n}" and n.endswith("q_proj.base_layer")
    }
    assert kinds == {"bitsandbytes"}
    vision = [
        m
        for n, m in loaded.model.named_modules()
        if any(f".{part}." in f".{n}." for part in (*family.vision_parts, *family.projector_parts))
    ]
    assert vision and not any(type(m).__module__.startswith("bitsandbytes") for m in vision)
    from judge.scoring.engine import JudgeEngine
    from judge.scoring.inputs import load_inputs

    path = write_items(tmp_path / "items", demo_items(1))
    records = JudgeEngine.for_judge(loaded).score_records(load_inputs([path]).records)
    assert records and all(r.score is not None and 0 <= r.score <= 6 for r in records)


# -- 2. --reproducible


@pytest.mark.slow
@pytest.mark.parametrize("tiny_name", FAMILIES)
def test_reproducible_scores_are_the_same_bits_in_every_batching(tiny_name, tmp_path):
    """float32 (fast on the CPU) over every batching, shared prefix on and off, through the engine
    ``Judge.load`` and ``judge-score`` build and through ``judge-score`` itself; bfloat16 (where the default
    mode's batchings differ most) alone against together."""
    from judge.scoring.engine import JudgeEngine
    from judge.scoring.inputs import load_inputs

    items = demo_items(1)  # one item per task family, 1 to 3 images each
    path = write_items(tmp_path, items)
    records = load_inputs([path]).records

    def each_alone(engine) -> dict[tuple[str, str], float]:
        return {k: v for rec in records for k, v in scores_of(engine.score_records([rec])).items()}

    loaded = judge.models.load(tiny_name, "mmie", dtype="float32", progress=False)
    for share in (True, False):
        repro = JudgeEngine.for_judge(loaded, reproducible=True, share_prefix=share)
        alone = each_alone(repro)
        assert len(alone) == sum(len(judge_criteria_of(it)) for it in items)
        assert all(v is not None for v in alone.values())
        others = {
            "together": repro,
            "one response per pass": JudgeEngine.for_judge(
                loaded, reproducible=True, share_prefix=share, batch_size=1
            ),
            "512 tokens per pass": JudgeEngine.for_judge(
                loaded, reproducible=True, share_prefix=share, batch_tokens=512
            ),
        }
        for name, engine in others.items():
            assert scores_of(engine.score_records(records)) == alone, (share, name)
        assert scores_of(repro.score_records(records[::-1])) == alone, (share, "reversed")
        # judge-score's own options, one response per pass and a small token budget.
        out = tmp_path / f"cli-{share}"
        args = [str(path), "--judge", tiny_name, "--rubric", "mmie", "--dtype", "float32", "--reproducible",
                "--batch-size", "1", "--batch-tokens", "512", "--out", str(out), "--no-progress"]  # fmt: skip
        assert score_main(args if share else [*args, "--no-share-prefix"]) == 0
        assert {k: r["score"] for k, r in scores_file(out).items()} == alone, (share, "judge-score")

    # The default mode batches items together: their scores move in their last bits (so the equalities above
    # could fail), by little.
    default = JudgeEngine.for_judge(loaded)
    d_alone, d_together = each_alone(default), scores_of(default.score_records(records))
    assert sum(d_alone[k] != d_together[k] for k in d_alone) > 0
    assert max(abs(d_alone[k] - d_together[k]) for k in d_alone) < 1e-5

    bf16 = judge.Judge.load(tiny_name, rubric="mmie", dtype="bfloat16", reproducible=True)
    assert scores_of(bf16.score_records(items, root=tmp_path)) == {
        k: v for it in items for k, v in scores_of(bf16.score_records([it], root=tmp_path)).items()
    }


def judge_criteria_of(item: dict) -> list[str]:
    from judge.core.rubric import load_rubric

    return load_rubric("mmie").family(item["task"]).criterion_ids


# -- 3. calibration


@pytest.mark.slow
@pytest.mark.parametrize("tiny_name", FAMILIES)
def test_calibration_is_fitted_written_into_the_card_and_read_back(tiny_name, tmp_path, small_demo, rubric):
    from judge.cli.calibrate import main as calibrate_main
    from judge.models.calibration import read_calibration
    from judge.models.card import CardRubric, JudgeCard, read_card, write_card
    from judge.models.loading import save_tiny_scorer

    family = families.by_tiny_name(tiny_name)
    assert family is not None
    folder = tmp_path / "judge"  # a judge folder as judge-train writes one, the tiny model as its weights
    save_tiny_scorer(folder / "merged", seed=0, name=tiny_name)
    card = JudgeCard(
        base_model=f"{tiny_name}:seed=0",
        family=family.name,
        finetune="full",
        rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash),
        scale=rubric.scale.values,
        target_format="score",
    )
    write_card(folder, card)
    assert judge.models.load(folder, progress=False).spec.calibration is None

    code = calibrate_main(["--judge", str(folder), "--human", str(small_demo), "--min-items", "20",
                           "--no-progress", "--device", "cpu"])  # fmt: skip
    assert code == 0
    cal = read_calibration(folder / "calibration.json")
    written = read_card(folder)
    assert written.family == family.name
    assert written.calibration is not None and written.calibration.fingerprint == cal.fingerprint()
    assert cal.data.n_items == 12 * 3 * 7

    loaded = judge.models.load(folder, progress=False)
    assert loaded.family == family.model_types[0]
    assert loaded.spec.calibration is not None and loaded.spec.calibration.fingerprint() == cal.fingerprint()
    # judge-score on the folder writes the calibrated view beside the raw read-out it was fitted on.
    out = tmp_path / "score"
    assert score_main([str(small_demo), "--judge", str(folder), "--out", str(out), "--no-progress",
                       "--device", "cpu", "--limit", "3"]) == 0  # fmt: skip
    raw = {
        (r["id"], r["criterion"]): r
        for r in map(json.loads, (folder / "calibration" / "scores.jsonl").open())
    }
    got = scores_file(out)
    assert got
    for k, r in got.items():
        assert r["producer"]["calibration"] == cal.producer()
        assert r["raw_score"] == pytest.approx(raw[k]["score"], abs=TOL)
        assert r["interval"][0] <= r["score"] <= r["interval"][1]


# -- 4. the context budget


@pytest.mark.parametrize("tiny_name", FAMILIES)
def test_images_over_the_context_budget_are_refused_as_for_internvl(tiny_name, tmp_path):
    """judge-score with ``--max-tokens`` one token under an item's prompt (the images take it over: the text
    alone fits): null with the reason InternVL's refusal gives, word for word but for the numbers."""
    item = next(it for it in demo_items(1) if it["task"] == "SA")
    path = write_items(tmp_path, [item])

    def run(name: str, max_tokens: int | None) -> dict[tuple[str, str], dict]:
        out = tmp_path / f"{name}-{max_tokens}"
        extra = ["--max-tokens", str(max_tokens)] if max_tokens else []
        assert score_main([str(path), "--judge", name, "--rubric", "mmie", "--out", str(out), "--no-progress",
                           *extra]) == 0  # fmt: skip
        return scores_file(out)

    reasons = {}
    for name in ("tiny", tiny_name):
        full = run(name, None)
        assert all(r["score"] is not None for r in full.values())
        n = max(r["details"]["num_tokens"] for r in full.values())
        text_only = {**item, "question": text_of(item["question"]), "response": text_of(item["response"])}
        plain = write_items(tmp_path / f"text-{name}", [text_only])
        out = tmp_path / f"text-{name}-out"
        assert score_main([str(plain), "--judge", name, "--rubric", "mmie", "--out", str(out), "--no-progress",
                           "--max-tokens", str(n - 1)]) == 0  # fmt: skip
        assert all(r["score"] is not None for r in scores_file(out).values())  # the text alone fits
        over = run(name, n - 1)
        assert over.keys() == full.keys()
        assert all(r["score"] is None and r["details"]["reason_code"] == "too_long" for r in over.values())
        reason = max(over.values(), key=lambda r: r["details"].get("num_tokens", 0))["reason"]
        assert f"the prompt is {n} tokens" in reason and f"over the context budget of {n - 1}" in reason
        reasons[name] = re.sub(r"\d+", "N", reason)
    assert reasons[tiny_name] == reasons["tiny"]


def text_of(content: list) -> list:
    return [p for p in content if not (isinstance(p, dict) and p.get("type") == "image")]


# -- 5. multi-image interleaved items through judge-score


@pytest.mark.parametrize("tiny_name", FAMILIES)
def test_interleaved_items_with_two_images_score_through_judge_score(tiny_name, tmp_path):
    from judge.scoring.engine import JudgeEngine
    from judge.scoring.inputs import load_inputs

    def item(i: str, first: str, second: str) -> dict:
        return {
            "id": i,
            "benchmark": "mmie",
            "task": "SA",
            "model": "m1",
            "question": [{"type": "text", "text": "Tell the story of these two pictures."}],
            "response": [
                {"type": "text", "text": "It starts here:"},
                {"type": "image", "image": f"images/{first}"},
                {"type": "text", "text": "and then it goes on there:"},
                {"type": "image", "image": f"images/{second}"},
                {"type": "text", "text": "which is where it ends."},
            ],
        }

    a, b = "sa-000-r0-0.png", "msr-001-q0.png"
    items = [item("ab", a, b), item("ba", b, a), item("text", a, b)]
    items[2]["response"] = text_of(items[2]["response"])
    path = write_items(tmp_path, items)
    out = tmp_path / "out"
    assert score_main([str(path), "--judge", tiny_name, "--rubric", "mmie", "--out", str(out),
                       "--no-progress"]) == 0  # fmt: skip
    got = scores_file(out)
    crits = judge_criteria_of(items[0])
    assert set(got) == {(it["id"], c) for it in items for c in crits}
    assert all(r["score"] is not None and r["status"] == "ok" for r in got.values())

    # Both images are in the prompt: their tokens are what the processor makes of them, in either order.
    loaded = judge.models.load(tiny_name, "mmie", progress=False)
    tokens = {i: got[(i, "overall")]["details"]["num_tokens"] for i in ("ab", "ba", "text")}
    n_images = image_tokens(loaded.processor, [a, b])
    assert n_images > 8 and tokens["ab"] == tokens["ba"] == tokens["text"] + n_images
    # In their places: swapping them moves the scores.
    assert any(abs(got[("ab", c)]["score"] - got[("ba", c)]["score"]) > 10 * TOL for c in crits)
    # And the scores are the loaded judge's engine's on the same records.
    records = JudgeEngine.for_judge(loaded).score_records(load_inputs([path]).records)
    for r in records:
        assert r.score == pytest.approx(got[(r.id, r.criterion)]["score"], abs=TOL), (r.id, r.criterion)


def image_tokens(processor, names: list[str]) -> int:
    """The tokens the processor adds to a prompt for these images (its markers and expanded patches), as the
    family's own chat template places them."""
    from PIL import Image

    images = []
    for name in names:
        with Image.open(DEMO / "images" / name) as im:
            images.append(im.convert("RGB"))

    def length(content: list, imgs: list) -> int:
        text = processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False)
        out = processor(text=[text], images=imgs or None, add_special_tokens=False)
        return len(out["input_ids"][0])

    x = [{"type": "text", "text": "x"}]
    return length(x + [{"type": "image"}] * len(names), images) - length(x, [])


# -- a judge folder whose processor/ comes from another family


@pytest.mark.slow
def test_a_judge_folder_with_another_familys_processor_is_refused_naming_both(small_demo, tmp_path, capsys):
    """A user copying folders around: a Qwen2.5-VL judge whose ``processor/`` is Qwen3-VL's would fail deep in
    transformers (or score wrongly); judge-score refuses it in one line naming both families, no traceback."""
    from judge.models.loading import load_processor
    from judge.train import train_judge

    result = train_judge(
        "demo",
        overrides={
            "data.annotations": [str(small_demo)],
            "output_dir": str(tmp_path / "run"),
            "model.path": "tiny-qwen2.5-vl",
            "train.max_steps": 1,
            "eval.strategy": "no",
            "eval.at_start": False,
        },
    )
    shutil.rmtree(result.judge_dir / "processor")
    load_processor("tiny-qwen3-vl").save_pretrained(result.judge_dir / "processor")
    path = write_items(tmp_path / "items", demo_items(1))
    capsys.readouterr()
    code = score_main(
        [str(path), "--judge", str(result.judge_dir), "--out", str(tmp_path / "out"), "--no-progress"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "is a qwen2.5-vl model but its processor is a qwen3-vl processor" in err
