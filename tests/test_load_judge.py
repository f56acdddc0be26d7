"""One way to load a judge: ``judge.models.load`` takes a source and returns a LoadedJudge (card, rubric, score
tokens, calibration, model, processor). The engine and the Python API score through it, and give the numbers
that loading the weights by hand (the folder's adapter on its base, ``load_scorer``) and scoring with the
engine give."""

from __future__ import annotations

import json

import pytest
import torch

import judge.models
from judge.api import Judge
from judge.core.errors import ConfigError
from judge.models.card import CardRubric, JudgeCard, read_card, write_card
from judge.models.loader import JudgeSpec, LoadedJudge
from judge.models.loading import load_scorer
from judge.scoring.engine import JudgeEngine

pytestmark = pytest.mark.usefixtures("one_thread")


def _scale_tokens(tokenizer, values) -> list[int]:
    # Each scale value encoded on its own, by the tokenizer itself (not the function the loader uses).
    return [tokenizer.convert_tokens_to_ids(str(v)) for v in values]


@pytest.fixture(scope="module")
def adapter_judge(tmp_path_factory, rubric):
    """A LoRA judge folder as judge-train writes one (card, adapter/ on the tiny base; a non-trivial adapter,
    so that loading it changes the scores), then calibrated by judge-calibrate on the demo set."""
    from peft import LoraConfig, get_peft_model

    folder = tmp_path_factory.mktemp("loaded") / "judge"
    base, _ = load_scorer("tiny:seed=0")
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    peft_model.save_pretrained(folder / "adapter")
    card = JudgeCard(
        base_model="tiny:seed=0",
        finetune="lora",
        rubric=CardRubric(name=rubric.name, version=rubric.version, hash=rubric.hash),
        scale=rubric.scale.values,
        target_format="score",
    )
    write_card(folder, card)
    return folder


@pytest.fixture(scope="module")
def calibrated_judge(adapter_judge, small_demo):
    from judge.cli.calibrate import main as calibrate_main

    code = calibrate_main(["--judge", str(adapter_judge), "--human", str(small_demo), "--min-items", "20",
                           "--no-progress", "--device", "cpu"])  # fmt: skip
    assert code == 0
    return adapter_judge


def test_load_tiny_returns_the_model_its_rubric_and_score_tokens(rubric):
    loaded = judge.models.load("tiny", "mmie", device="cpu")
    assert isinstance(loaded, LoadedJudge) and isinstance(loaded.spec, JudgeSpec)
    assert loaded.source == "tiny" and loaded.card is None
    assert loaded.calibration is None and loaded.selective is None
    assert loaded.rubric.hash == rubric.hash and loaded.target_format == "score"
    assert loaded.device == "cpu" and loaded.family == "internvl"
    assert not loaded.model.training and next(loaded.model.parameters()).dtype == torch.float32
    assert loaded.tokenizer is loaded.processor.tokenizer
    assert loaded.score_tokens == _scale_tokens(loaded.tokenizer, rubric.scale.values)
    assert [loaded.tokenizer.decode([t]) for t in loaded.score_tokens] == [str(v) for v in range(7)]
    # The tiny model is the seeded one: the same weights as building it by hand.
    again, _ = load_scorer("tiny:seed=0")
    for (name, a), (_, b) in zip(loaded.model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_load_refuses_what_it_cannot_load(tmp_path):
    with pytest.raises(ConfigError, match="plain model .*rubric"):
        judge.models.load("tiny", device="cpu")
    with pytest.raises(ConfigError, match="does not exist"):
        judge.models.load(str(tmp_path / "nowhere"), "mmie", device="cpu")
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "judge_card.json").write_text("{}")
    with pytest.raises(ConfigError, match="invalid judge card"):
        judge.models.load(str(tmp_path / "judge"), device="cpu")


def test_load_a_judge_folder_gives_its_card_calibration_and_adapter(calibrated_judge, rubric):
    loaded = judge.models.load(calibrated_judge, device="cpu")
    card = read_card(calibrated_judge)
    assert loaded.card == card and loaded.source == str(calibrated_judge.resolve())
    assert loaded.rubric.hash == card.rubric.hash == rubric.hash
    assert card.calibration is not None and loaded.calibration is not None
    assert loaded.calibration.fingerprint() == card.calibration.fingerprint
    assert loaded.score_tokens == _scale_tokens(loaded.tokenizer, rubric.scale.values)
    assert loaded.family == "internvl" and type(loaded.model).__name__ == "PeftModel"
    # The weights are the adapter's on the card's base, as loading them by hand gives.
    by_hand, _ = load_scorer(card.base_model, adapter=str(calibrated_judge / "adapter"))
    for (name, a), (_, b) in zip(
        loaded.model.state_dict().items(), by_hand.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    # Calibration off: the same judge, its raw read-out.
    raw = judge.models.load(calibrated_judge, device="cpu", calibration=False)
    assert raw.card == card and raw.calibration is None and raw.spec.fingerprint == loaded.spec.fingerprint
    # A spec resolved first (what a command does before it writes anything) loads the same judge.
    spec = judge.models.resolve(str(calibrated_judge))
    assert judge.models.load(spec, device="cpu").spec == loaded.spec


def test_engine_and_api_score_through_the_loader_as_by_hand(calibrated_judge, small_demo):
    items = [json.loads(x) for x in small_demo.read_text().splitlines()[:3]]
    from judge.scoring.inputs import prediction_records

    loaded = judge.models.load(calibrated_judge, device="cpu")
    records = prediction_records(items, loaded.rubric.name, root=small_demo.parent)
    through_loader = JudgeEngine.for_judge(loaded).score_records(records)
    # As before the loader: the weights loaded by hand, the engine built from them and the resolved spec.
    model, processor = load_scorer("tiny:seed=0", adapter=str(calibrated_judge / "adapter"))
    by_hand = JudgeEngine(model, processor, judge.models.resolve(str(calibrated_judge))).score_records(
        records
    )
    api = Judge.load(calibrated_judge, device="cpu").score_records(items, root=small_demo.parent)

    # The engine gives records in scoring order, the API in the items' order: compared by item and criterion.
    def keyed(recs):
        return {(r.id, r.criterion): r.model_dump() for r in recs}

    assert len(through_loader) == len(by_hand) == len(api) == len(keyed(api)) > 0
    assert keyed(through_loader) == keyed(by_hand) == keyed(api)
    for r in through_loader:
        assert r.status == "ok" and r.raw_score is not None and r.interval is not None  # calibrated
