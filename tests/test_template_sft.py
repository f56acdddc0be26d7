import json

import pytest
from PIL import Image

from judge.core.io import load_annotations
from judge.core.template import SCORE_CUE, build_judge_prompt, build_target
from judge.data.config import DataConfig, DataSections
from judge.data.sft import BudgetError, build_examples, count_tokens


def _image_runs(ids, image_token_id):
    runs, prev = [], None
    for t in ids:
        if t == image_token_id:
            if prev != image_token_id:
                runs.append(0)
            runs[-1] += 1
        prev = t
    return runs


def test_image_runs_match_images_in_content_order(tmp_path, rubric, tiny):
    _, processor = tiny
    # Different aspect ratios give different tile counts, so the run lengths show the order.
    sizes = {"wide.png": (224, 56), "square.png": (56, 56), "tall.png": (56, 112)}
    for name, size in sizes.items():
        Image.new("RGB", size, "blue").save(tmp_path / name)
    question = [{"type": "text", "text": "Look:"}, {"type": "image", "image": str(tmp_path / "wide.png")}]
    response = [
        {"type": "image", "image": str(tmp_path / "square.png")},
        {"type": "text", "text": "and"},
        {"type": "image", "image": str(tmp_path / "tall.png")},
    ]
    prompt = build_judge_prompt(rubric, "SA", "text_image_coherence", question, response)
    assert prompt.images == [str(tmp_path / n) for n in ("wide.png", "square.png", "tall.png")]
    text = processor.apply_chat_template(prompt.messages, add_generation_prompt=True, tokenize=False)
    images = [Image.open(p) for p in prompt.images]
    ids = processor(text=[text], images=images)["input_ids"][0]
    ip = processor.image_processor
    expected = [
        ip.get_number_of_image_patches(h, w, {}) * processor.image_seq_length for (w, h) in sizes.values()
    ]
    assert len(set(expected)) > 1  # the check below can tell the order apart
    assert _image_runs(ids, processor.image_token_id) == expected


def test_criterion_question_comes_last_and_prefix_is_shared(rubric):
    q, r = [{"type": "text", "text": "Q?"}], [{"type": "text", "text": "A."}]
    ref = [{"type": "text", "text": "42"}]
    prompts = {c: build_judge_prompt(rubric, "MSR", c, q, r, ref) for c in rubric.family("MSR").criterion_ids}
    prefixes = {json.dumps(p.messages[0]["content"][: p.prefix_parts]) for p in prompts.values()}
    assert len(prefixes) == 1  # every criterion of a response shares the same prefix
    for crit_id, p in prompts.items():
        content = p.messages[0]["content"]
        assert p.prefix_parts == len(content) - 1  # only the criterion question follows the prefix
        crit = rubric.family("MSR").criterion(crit_id)
        assert content[-1]["text"].index(crit.name) > 0
        full = "".join(part.get("text", "") for part in content)
        assert full.index("## Response to judge") < full.index("## Criterion")
        assert full.index("## Reference answer") < full.index("## Response to judge")
        assert "42" in full


def test_reference_only_for_families_that_use_it(rubric):
    p = build_judge_prompt(rubric, "SA", "overall", "q", "r", reference=[{"type": "text", "text": "secret"}])
    assert "secret" not in json.dumps(p.messages)


def test_targets():
    assert build_target(4) == "4"
    assert build_target(4, "Good.", "score_rationale") == "4\nGood."
    assert build_target(2, "Bad  \n text.", "rationale_score").endswith(f"\n{SCORE_CUE}2")
    with pytest.raises(ValueError, match="needs a rationale"):
        build_target(3, None, "rationale_score")


def _cfg(small_demo, **kw):
    return DataConfig(annotations=[str(small_demo)], **kw)


def test_build_examples_one_per_criterion(small_demo, rubric):
    recs = load_annotations(small_demo, rubric=rubric).records
    build = build_examples(recs, rubric, _cfg(small_demo))
    n = sum(len(v) for v in build.examples.values())
    assert n == sum(len(rubric.family(r.task).criterion_ids) for r in recs)
    ex = build.examples["train"][0]
    assert ex["prompt"][0]["role"] == "user" and ex["completion"][0]["role"] == "assistant"
    n_placeholders = sum(part["type"] == "image" for part in ex["prompt"][0]["content"])
    assert n_placeholders == len(ex["images"]) > 0
    assert ex["completion"][0]["content"][0]["text"] == str(ex["score"])
    only_overall = build_examples(recs, rubric, _cfg(small_demo, criteria="overall"))
    assert {e["criterion"] for v in only_overall.examples.values() for e in v} == {"overall"}


def test_rationale_targets(small_demo, rubric):
    recs = load_annotations(small_demo, rubric=rubric).records
    build = build_examples(recs, rubric, _cfg(small_demo, target="rationale_score"))
    text = build.examples["train"][0]["completion"][0]["content"][0]["text"]
    assert text.startswith("Rationale: ") and text.rsplit(SCORE_CUE, 1)[1].isdigit()


def test_token_budget_reduces_tiles_then_fails(tmp_path, rubric, tiny):
    _, processor = tiny
    Image.new("RGB", (112, 56), "red").save(tmp_path / "wide.png")  # 2 tiles + thumbnail at max_patches=2
    line = {
        "id": "a",
        "task": "SA",
        "question": "Tell.",
        "response": [{"type": "image", "image": "wide.png"}],
        "scores": {"overall": 4},
    }
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(line) + "\n")
    recs = load_annotations(path, rubric=rubric).records
    cfg = DataConfig(
        annotations=[str(path)], criteria="overall", split={"train": 1, "validation": 0, "test": 0}
    )
    full = build_examples(recs, rubric, cfg)
    count_tokens(full, processor, None)
    n_full = full.examples["train"][0]["num_tokens"]
    tile_tokens = processor.image_seq_length
    reduced = build_examples(recs, rubric, cfg)
    count_tokens(reduced, processor, max_tokens=n_full - 1)
    ex = reduced.examples["train"][0]
    assert ex["max_patches"] == 1 and ex["num_tokens"] == n_full - 2 * tile_tokens
    with pytest.raises(BudgetError, match="even with one tile per image"):
        count_tokens(build_examples(recs, rubric, cfg), processor, max_tokens=n_full - 3 * tile_tokens)
    with pytest.raises(BudgetError, match="over data.max_tokens"):
        count_tokens(build_examples(recs, rubric, cfg), processor, max_tokens=n_full - 1, tile_fallback=False)


def test_max_images(small_demo, rubric):
    recs = load_annotations(small_demo, rubric=rubric).records
    with pytest.raises(BudgetError, match="max_images=1"):
        build_examples(recs, rubric, _cfg(small_demo, max_images=1))


def test_build_writes_dataset_jsonl_and_stats(tmp_path, small_demo, tiny):
    import datasets

    from judge.data.build import build_sft_dataset

    _, processor = tiny
    sections = DataSections(data=_cfg(small_demo), output_dir=str(tmp_path / "run"))
    out = build_sft_dataset(sections, processor, progress=False)
    assert out == tmp_path / "run" / "data"
    dd = datasets.load_from_disk(str(out / "dataset"))
    stats = json.loads((out / "stats.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    for split in ("train", "validation", "test"):
        assert len(dd[split]) == stats["splits"][split]["examples"] == manifest["counts"][split]
        lines = (out / f"{split}.jsonl").read_text().splitlines()
        assert len(lines) == len(dd[split])
        recs = (out / "splits" / f"{split}.jsonl").read_text().splitlines()
        assert len(recs) == stats["splits"][split]["records"]
    row = dd["train"][0]
    assert isinstance(row["images"][0], Image.Image)
    assert row["num_tokens"] > 0
    first = json.loads((out / "train.jsonl").read_text().splitlines()[0])
    assert first["images"][0].startswith("splits/images/") and (out / first["images"][0]).is_file()
    assert manifest["split_images"]["files"] == len(list((out / "splits" / "images").rglob("*.png"))) > 0
    assert manifest["rubric"]["name"] == "mmie" and len(manifest["data_hash"]) == 64
    assert (
        stats["splits"]["train"]["tokens_per_example"]["max"]
        >= stats["splits"]["train"]["tokens_per_example"]["min"]
    )


def test_an_empty_split_loads_back_empty_with_its_columns(tmp_path, small_demo):
    from judge.data.build import build_sft_dataset
    from judge.data.sft import load_sft_dataset

    # datasets cannot load an empty split saved to disk: a build with no test split must still load.
    cfg = _cfg(small_demo, split={"train": 0.8, "validation": 0.2, "test": 0})
    out = build_sft_dataset(DataSections(data=cfg, output_dir=str(tmp_path / "run")), None, progress=False)
    dd = load_sft_dataset(out)
    assert len(dd["test"]) == 0 and len(dd["train"]) > 0 and len(dd["validation"]) > 0
    assert dd["test"].column_names == dd["train"].column_names
