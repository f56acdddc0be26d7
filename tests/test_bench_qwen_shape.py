"""The Qwen2.5-VL shapes of scripts/bench_score.py and scripts/bench_train.py (``scripts/_bench_qwen.py``, issue
42 Part A.4): the 3B shape is Qwen2.5-VL-3B-Instruct's (on the meta device, no memory), the windowed ViT's FLOP
count is what the tower runs (torch's FLOP counter on the tiny model), and both scripts run end to end on the
CPU with the tiny Qwen2.5-VL shape. The `all` phase of scripts/device/gpu_figures.sh runs the Qwen shape beside
InternVL's in tests/test_bench_scripts.py."""

from __future__ import annotations

import json

import pytest
from test_bench_scripts import _load

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bs():
    return _load("bench_score")


@pytest.fixture(scope="module")
def bt(bs):
    return _load("bench_train")


def test_the_3b_shape_is_qwen25vl_3b(bs, rubric):
    import torch

    from judge.models import families

    shape = bs.SHAPES["qwen2.5-vl-3b"]
    processor = bs.build_processor(shape, 1, rubric)
    config = bs.build_config(shape, processor)
    counts = bs.param_counts(config)  # on the meta device
    assert 3.70e9 < counts["total"] < 3.80e9  # the checkpoint's 3.75B
    assert 0.66e9 < counts["vision_tower"] + counts["projector"] < 0.68e9
    assert counts["lm_head_untied"] == 0 and config.text_config.vocab_size == 151_936 > len(
        processor.tokenizer
    )
    v, t = config.vision_config, config.text_config
    assert (v.depth, v.hidden_size, v.num_heads, v.intermediate_size, v.out_hidden_size) == (
        32,
        1280,
        16,
        3420,
        2048,
    )
    assert v.window_size == 112 and list(v.fullatt_block_indexes) == [7, 15, 23, 31]
    assert (t.num_hidden_layers, t.hidden_size, t.num_attention_heads, t.num_key_value_heads) == (
        36,
        2048,
        16,
        2,
    )
    assert t.intermediate_size == 11008 and t.rope_parameters["mrope_section"] == [16, 24, 24]
    # The recipe's pixel bounds (rubric6-qwen2.5vl-3b): a workload image is 256 to 1,024 merged tokens.
    from judge.train.config import load_run_config

    _, recipe = load_run_config("rubric6-qwen2.5vl-3b")
    ip = processor.image_processor
    assert (ip.size["shortest_edge"], ip.size["longest_edge"]) == (
        recipe.model.min_pixels,
        recipe.model.max_pixels,
    )
    assert 256 + 2 <= bs.image_tokens(processor) <= 1024 + 2
    # The registry takes it for a Qwen2.5-VL: the judge's scoring and training treat it as the checkpoint.
    with torch.device("meta"):
        model = bs.model_class(config)(config)
    assert families.of_model(model) is families.QWEN25VL


def test_the_vision_flop_count_is_what_the_tower_runs(bs, rubric):
    """torch's FLOP counter on the tiny tower (eager attention: its matmuls are counted) for images whose
    merged grids cut into partial windows: within 1% (the count charges biases and norm weights as
    multiply-adds), where charging every block full attention would be several percent over."""
    import dataclasses

    import torch
    from PIL import Image
    from torch.utils.flop_counter import FlopCounterMode

    shape = bs.SHAPES["tiny-qwen2.5-vl"]
    processor = bs.build_processor(shape, 1, rubric)
    config = bs.build_config(shape, processor)
    model = bs.build_model(config, processor, "cpu", torch.float32, "eager")
    counts = bs.param_counts(config)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    fm = bs.flop_model(config, counts)
    all_full = dataclasses.replace(fm, vit_full_layers=fm.vit_layers)
    for size in ((60, 40), (100, 70), (120, 120)):
        out = processor.image_processor(images=[Image.new("RGB", size, (10, 20, 30))], return_tensors="pt")
        grid, pixels = out["image_grid_thw"], out["pixel_values"]
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model.model.visual(pixels, grid_thw=grid)
        measured = counter.get_total_flops()
        counted = fm.vision_input(pixels, {"image_grid_thw": grid})
        assert measured <= counted < 1.01 * measured, (size, measured, counted)
        if int(grid[0, 1]) * int(grid[0, 2]) == 64:  # two windows a side: full attention is 4x their cost
            assert all_full.vision_input(pixels, {"image_grid_thw": grid}) > 1.02 * measured


def test_bench_score_runs_the_tiny_qwen_shape(bs, tmp_path):
    argv = ["--shape", "tiny-qwen2.5-vl", "--responses", "4", "--new-tokens", "4", "--mmie-responses", "1",
            "--prompt-tokens", "300", "--warmup", "1", "--repeats", "1", "--device", "cpu", "--allow-dirty",
            "--threads", "1", "--out", str(tmp_path)]  # fmt: skip
    assert bs.main(argv) == 0
    (path,) = tmp_path.glob("bench_score_cpu_*.json")
    d = json.loads(path.read_text())
    model = d["config"]["model"]
    assert model["shape"] == "tiny-qwen2.5-vl" and model["language"]["type"] == "qwen2_5_vl_text"
    assert model["vision"]["full_attention_blocks"] == [1] and d["flop_formula"]["L_full"] == 1
    w = d["config"]["workload"]
    assert w["responses"] == 4 and w["criterion_scores"] == 28 and w["images"] > 0
    assert 200 < w["prompt_tokens_mean"] < 400
    shared, unshared = d["results"]["shared"], d["results"]["unshared"]
    assert 0 < shared["flops"] < unshared["flops"] and shared["prefill_tokens"] < unshared["prefill_tokens"]
    assert d["agreement"]["unshared_vs_shared"]["max_abs_diff_expected"] < 1e-4
    assert d["results"]["mmie"]["generated_tokens"] == 7 * 4


@pytest.mark.slow
def test_bench_train_runs_the_tiny_qwen_shape(bt, tmp_path):
    import torch

    if torch.cuda.is_available():  # build_model puts 4-bit models on the GPU; run with CUDA_VISIBLE_DEVICES=
        pytest.skip("CPU test: hide the GPU (CUDA_VISIBLE_DEVICES=) to run it on a GPU machine")
    argv = ["--shape", "tiny-qwen2.5-vl", "--steps", "1", "--warmup-steps", "1", "--batch-size", "2",
            "--prompt-tokens", "250", "--workers", "0", "--device", "cpu", "--configs", "lora,qlora-gc",
            "--repeats", "1", "--allow-dirty", "--out", str(tmp_path)]  # fmt: skip
    assert bt.main(argv) == 0
    (path,) = tmp_path.glob("bench_train_cpu_*.json")
    d = json.loads(path.read_text())
    assert d["config"]["model"]["shape"] == "tiny-qwen2.5-vl"
    for name in ("lora", "qlora-gc"):
        r = d["results"][name]
        assert "error" not in r, (name, r)
        assert r["steps"] == 1 and r["tokens"] > 0 and r["loss_finite"] and r["flops_6n"] > r["flops"] > 0
    assert d["results"]["lora"]["trainable_params"] == d["results"]["qlora-gc"]["trainable_params"]
