import importlib.util

import pytest
import torch
from PIL import Image

from judge.core.errors import ConfigError
from judge.core.template import build_judge_prompt
from judge.models import (
    InternVLImageTextProcessor,
    ScoreTokenError,
    build_tiny_scorer,
    load_scorer,
    save_tiny_scorer,
    score_token_ids,
)


def _batch(processor, rubric):
    img = Image.new("RGB", (96, 64), (200, 30, 30))
    prompt = build_judge_prompt(rubric, "SA", "overall", "A red square.", [{"type": "image", "image": "x"}])
    text = processor.apply_chat_template(prompt.messages, add_generation_prompt=True, tokenize=False)
    return processor(text=[text], images=[img], return_tensors="pt")


def test_tiny_is_native_internvl_and_deterministic(tiny):
    from transformers import InternVLForConditionalGeneration

    model, processor = tiny
    assert isinstance(model, InternVLForConditionalGeneration)
    assert isinstance(processor, InternVLImageTextProcessor)
    again, proc2 = build_tiny_scorer(seed=0)
    assert processor.tokenizer.get_vocab() == proc2.tokenizer.get_vocab()
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True)
    )
    other, _ = build_tiny_scorer(seed=1)
    assert not torch.equal(model.lm_head.weight, other.lm_head.weight)


def test_every_scale_value_is_one_token(tiny, rubric):
    _, processor = tiny
    ids = score_token_ids(processor.tokenizer, rubric.scale.values)
    assert len(ids) == 7 and len(set(ids)) == 7
    assert processor.tokenizer.convert_ids_to_tokens(ids) == [str(v) for v in range(7)]


def test_multi_token_scale_value_is_a_clear_error(tiny):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # A word-level tokenizer that knows "1" and "0" but not "10".
    vocab = {"[UNK]": 0, **{str(i): i + 1 for i in range(10)}, "Score:": 11, "\n": 12, " ": 13}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    with pytest.raises(ScoreTokenError, match="scale value 10 is 2 tokens"):
        score_token_ids(fast, range(11), contexts=())


def test_save_and_load_same_logits(tmp_path, tiny, rubric):
    model, processor = tiny
    save_tiny_scorer(tmp_path / "tiny", seed=0)
    loaded, proc = load_scorer(str(tmp_path / "tiny"))
    assert isinstance(proc, InternVLImageTextProcessor)
    batch = _batch(processor, rubric)
    with torch.no_grad():
        a = model(**batch).logits
        b = loaded(**_batch(proc, rubric)).logits
    assert torch.allclose(a, b, atol=1e-6)
    assert (tmp_path / "tiny" / "model.safetensors").is_file()


def test_works_without_torchvision(tiny, rubric):
    model, processor = tiny
    if importlib.util.find_spec("torchvision") is None:
        assert "torchvision" not in type(processor.image_processor).__module__
    batch = _batch(processor, rubric)
    assert batch["pixel_values"].shape[1:] == (3, 56, 56)
    with torch.no_grad():
        out = model(**batch)
    assert torch.isfinite(out.logits).all()
    with pytest.raises(ValueError, match="not video"):
        processor(text=["x"], videos=[[img for img in [Image.new("RGB", (8, 8))]]])


def test_load_scorer_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_scorer(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no config.json"):
        load_scorer(str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="adapter_config.json"):
        load_scorer("tiny", adapter=str(tmp_path / "empty"))


def test_load_scorer_tiny_spec_and_adapter(tmp_path, rubric):
    from peft import LoraConfig, get_peft_model

    base, processor = load_scorer("tiny:seed=0")
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)  # a non-trivial adapter, so loading it must change the logits
    peft_model.save_pretrained(tmp_path / "adapter")
    plain, _ = load_scorer("tiny")
    adapted, _ = load_scorer("tiny", adapter=str(tmp_path / "adapter"))
    batch = _batch(processor, rubric)
    with torch.no_grad():
        assert not torch.allclose(plain(**batch).logits, adapted(**batch).logits)
        assert torch.allclose(peft_model(**batch).logits, adapted(**batch).logits, atol=1e-6)
    # The same adapter pickled (adapter_model.bin) is refused: weights load from safetensors only.
    peft_model.save_pretrained(tmp_path / "pickled", safe_serialization=False)
    assert (tmp_path / "pickled" / "adapter_model.bin").is_file()
    with pytest.raises(ConfigError, match="safetensors only"):
        load_scorer("tiny", adapter=str(tmp_path / "pickled"))


def test_stock_internvl_hub_layout_loads_image_only(tmp_path):
    """Hub checkpoints (OpenGVLab/InternVL3-*-hf) keep the image processor in preprocessor_config.json,
    name the stock InternVLProcessor and ship a video processor config; the image-only processor
    must load that layout as it is."""
    import json

    d = save_tiny_scorer(tmp_path / "hub", seed=0)
    pc = json.loads((d / "processor_config.json").read_text())
    image_cfg = {
        **pc.pop("image_processor"),
        "image_processor_type": "GotOcr2ImageProcessorFast",
        "processor_class": "InternVLProcessor",
    }
    (d / "preprocessor_config.json").write_text(json.dumps(image_cfg))
    (d / "processor_config.json").write_text(json.dumps({**pc, "processor_class": "InternVLProcessor"}))
    (d / "video_preprocessor_config.json").write_text(
        json.dumps({"video_processor_type": "InternVLVideoProcessor", "processor_class": "InternVLProcessor"})
    )
    _, proc = load_scorer(str(d))
    assert isinstance(proc, InternVLImageTextProcessor)
    assert proc.image_seq_length == 4 and proc.image_processor.max_patches == 2


def _write(folder, card: dict):
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "judge_card.json").write_text(json.dumps(card))
    return folder


def test_judge_card_reads_old_cards_and_writes_them_back_unchanged(tmp_path, rubric):
    import json

    from judge.models.card import read_card, write_card

    # A card of an older judge-train: fewer fields, and one this version does not know.
    old = {
        "base_model": "tiny:seed=0",
        "rubric": {"name": rubric.name, "version": rubric.version, "hash": rubric.hash},
        "target_format": "score",
        "quantization": "4bit",
        "legacy_note": {"kept": True},
    }
    card = read_card(_write(tmp_path / "old", old))
    assert card.rubric.hash == rubric.hash and card.quantization == "4bit" and card.training is None
    assert card.model_extra == {"legacy_note": {"kept": True}}
    write_card(tmp_path / "again", card)
    assert json.loads((tmp_path / "again" / "judge_card.json").read_text()) == old


def test_a_broken_card_names_its_file_and_field(tmp_path, rubric):
    from judge.models.card import read_card

    good = {"base_model": "tiny", "rubric": {"name": rubric.name, "hash": rubric.hash}}
    for broken, field in (
        ({**good, "rubric": {"name": rubric.name}}, "rubric.hash"),
        ({**good, "rubric": {"name": rubric.name, "hash": ""}}, "rubric.hash"),
        ({**good, "target_format": "essay"}, "target_format"),
        ({"rubric": good["rubric"]}, "base_model"),
    ):
        folder = _write(tmp_path / field, broken)
        with pytest.raises(ConfigError) as e:
            read_card(folder)
        assert f"{folder / 'judge_card.json'}: invalid judge card: {field}:" in str(e.value)
    (tmp_path / "json" / "judge_card.json").parent.mkdir()
    (tmp_path / "json" / "judge_card.json").write_text("{")
    with pytest.raises(ConfigError, match="judge_card.json: not valid JSON"):
        read_card(tmp_path / "json")
