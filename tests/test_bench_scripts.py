"""scripts/bench_score.py and scripts/bench_train.py on the CPU with the tiny shapes and a tiny workload.

The real measurements need a GPU; these tests prove the scripts run end to end, write every
field, and that what they time is right: (b) and (c) give the same scores, mode (a) really
generates the full rationale whatever the model wants, the labels-only loss equals the stock
loss, and the FLOP count matches the model's real parameters.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import forkserver
import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # bench_train imports bench_score by this name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bs():
    return _load("bench_score")


@pytest.fixture(scope="module")
def bt(bs):
    return _load("bench_train")


@pytest.fixture(scope="module")
def btd(bt):
    """bench_train's workload, losses and FLOPs (scripts/_bench_train_data.py)."""
    return _load("_bench_train_data")


@pytest.fixture(scope="module")
def tiny_parts(bs, rubric):
    import torch

    shape = bs.SHAPES["tiny"]
    processor = bs.build_processor(shape, 1, rubric)
    config = bs.build_config(shape, processor)
    model = bs.build_model(config, processor, "cpu", torch.float32, "sdpa")
    return shape, processor, config, model


RESULT_FIELDS = {
    "responses",
    "criterion_scores",
    "seconds",
    "responses_per_s",
    "criterion_scores_per_s",
    "prefill_tokens",
    "prefill_tokens_per_s",
    "flops",
    "tflops_per_s",
    "mfu",
    "peak_allocated_bytes",
    "peak_allocated_gib",
    "peak_reserved_bytes",
    "peak_reserved_gib",
}


def test_bench_score_tiny_three_modes(bs, tmp_path):
    argv = [
        "--shape",
        "tiny",
        "--responses",
        "4",
        "--new-tokens",
        "4",
        "--mmie-responses",
        "1",
        "--prompt-tokens",
        "300",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--device",
        "cpu",
        "--allow-dirty",
        "--profile",
        "--profile-modes",
        "unshared,shared",
        "--out",
        str(tmp_path),
    ]
    assert bs.main(argv) == 0
    (path,) = tmp_path.glob("bench_score_cpu_*.json")
    d = json.loads(path.read_text())
    assert d["command"] == "python scripts/bench_score.py " + " ".join(argv)
    for key in ("date", "device", "versions", "config", "flop_formula", "results", "ratios", "agreement"):
        assert key in d, key
    assert d["device"]["type"] == "cpu" and d["device"]["peak_bf16_tflops"] is None
    assert {"torch", "transformers"} <= set(d["versions"])
    assert d["config"]["model"]["params"]["total"] > 0
    w = d["config"]["workload"]
    assert w["responses"] == 4 and w["criterion_scores"] == 28
    assert 200 < w["prompt_tokens_mean"] < 400
    for mode in ("mmie", "unshared", "shared"):
        r = d["results"][mode]
        assert RESULT_FIELDS <= set(r), (mode, RESULT_FIELDS - set(r))
        assert r["mfu"] is None and r["peak_reserved_gib"] is None  # CPU: no peak rate, no GPU memory
        assert r["responses_per_s"] > 0 and r["flops"] > 0
    a = d["results"]["mmie"]
    assert a["responses"] == 1 and a["criterion_scores"] == 7 and a["generated_tokens"] == 7 * 4
    # Prefix sharing does less work: fewer prefill tokens and FLOPs than no sharing, same scores.
    assert d["results"]["shared"]["prefill_tokens"] < d["results"]["unshared"]["prefill_tokens"]
    assert d["results"]["shared"]["flops"] < d["results"]["unshared"]["flops"]
    agree = d["agreement"]["unshared_vs_shared"]
    assert agree["pairs"] == 28 and agree["max_abs_diff_expected"] < 1e-4
    assert agree["max_abs_diff_distribution"] < 1e-4
    assert set(d["ratios"]) == {"c_over_a_responses_per_s", "c_over_b_responses_per_s"}
    # Traceable to code: the commit and whether the tree was dirty; 4 responses, 1 repeat: below the protocol.
    assert isinstance(d["dirty"], bool) and d["git_commit"]
    assert d["protocol"] == {"min_responses": 128, "min_repeats": 3, "met": False}
    # The profile names where (c)'s time goes: the prefix pass, the KV-cache copy, the suffix pass, the read-out.
    spans = d["profile"]["shared"]["spans"]
    for name in ("judge.encode", "judge.prefix_pass", "judge.kv_copy", "judge.suffix_pass", "judge.readout"):
        assert spans[name]["count"] >= 1 and spans[name]["cpu_s"] >= 0, name
    assert "judge.unshared_pass" in d["profile"]["unshared"]["spans"] and d["profile"]["shared"]["top_ops"]


def test_a_dirty_tree_is_refused_and_the_protocol_is_checked(bs, tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("one")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    clean = bs.source_state(repo)
    assert clean["dirty"] is False and len(clean["git_commit"]) == 40
    bs.require_clean(clean, allow_dirty=False)
    (repo / "untracked.json").write_text("{}")  # a result file not yet committed does not make it dirty
    assert bs.source_state(repo)["dirty"] is False
    (repo / "a.txt").write_text("two")
    dirty = bs.source_state(repo)
    assert dirty == {"git_commit": clean["git_commit"], "dirty": True}
    with pytest.raises(SystemExit, match="differs from commit .*--allow-dirty"):
        bs.require_clean(dirty, allow_dirty=False)
    bs.require_clean(dirty, allow_dirty=True)
    assert bs.protocol(128, 3)["met"] and not bs.protocol(127, 3)["met"] and not bs.protocol(256, 2)["met"]
    # Defaults meet it; chunks are small enough for every worker to get several (16 responses, 6 workers).
    assert bs.MIN_REPEATS == 3 and bs.auto_chunk(16, 6) == 4 and bs.auto_chunk(256, 2) == 64


def test_workers_encode_gives_the_same_scores(bs, tiny_parts, rubric):
    from judge.models.readout import ExpectedScorer

    _, processor, _, model = tiny_parts
    items = bs.build_workload(
        processor,
        rubric,
        responses=3,
        images=(1, 2),
        prompt_tokens=250,
        families=["SA", "MSR"],
        jitter=0.2,
        seed=3,
    )
    requests = [bs.request_for(it, rubric) for it in items]
    scorer = ExpectedScorer(model, processor, rubric.scale.values)
    kw = dict(share_prefix=True, batch_tokens=4096, batch_size=64)
    inline = bs._scores_by_key(bs.score_judge(scorer, bs.Encoder(processor, requests, 0, 2), **kw))
    encoder = bs.Encoder(processor, requests, 1, 2)
    assert encoder.start() > 0  # the worker runs before any timed pass
    pids = [w.pid for w in encoder.loader._iterator._workers]  # persistent: kept by the loader
    first = bs._scores_by_key(bs.score_judge(scorer, encoder, **kw))
    again = bs._scores_by_key(bs.score_judge(scorer, encoder, **kw))  # a second pass: the same workers
    assert [w.pid for w in encoder.loader._iterator._workers] == pids and len(pids) == 1
    assert bs.agreement(inline, first)["max_abs_diff_expected"] < 1e-5
    assert bs.agreement(first, again)["max_abs_diff_expected"] == 0
    assert len(inline) == 21


def test_mmie_mode_generates_the_full_rationale_even_when_eos_wins(bs, tiny_parts, rubric):
    """With the model pushed to end at once, score_with_rationale stops after one token; mode (a) does not."""
    from judge.models.readout import ExpectedScorer

    _, processor, _, model = tiny_parts
    item = bs.build_workload(
        processor, rubric, responses=1, images=(1, 1), prompt_tokens=200, families=["SA"], jitter=0.0, seed=0
    )[0]
    request = bs.request_for(item, rubric, "rationale_score")
    request.criteria, request.prompts = request.criteria[:2], request.prompts[:2]
    scorer = ExpectedScorer(model, processor, rubric.scale.values)
    eos = processor.tokenizer.eos_token_id

    def push_eos(_module, _inputs, output):
        output[..., eos] += 1e4
        return output

    handle = model.lm_head.register_forward_hook(push_eos)
    try:
        stock_lengths = []
        orig = model.generate

        def count(*a, **k):
            out = orig(*a, **k)
            stock_lengths.append(out.shape[1] - k["input_ids"].shape[1])
            return out

        model.generate = count
        try:
            scorer.score_with_rationale(request, max_new_tokens=5)
        finally:
            del model.generate
        results, gen = bs.score_mmie(scorer, [request], new_tokens=5)
    finally:
        handle.remove()
    assert stock_lengths == [1, 1]  # EOS first: the stock call stops
    assert gen == [5, 5]  # EOS ignored: the full rationale, so every run does the same work
    ((_, scores),) = results
    for s in scores:
        assert abs(sum(s.distribution) - 1) < 1e-6 and 0 <= s.expected <= 6 and s.rationale is not None
    assert "generate" not in vars(model)  # the wrapper is gone


def test_labels_only_loss_equals_the_stock_loss(bs, btd, tiny_parts, rubric):
    import torch

    from judge.train.collator import JudgeCollator

    _, processor, _, model = tiny_parts
    items = bs.build_workload(
        processor,
        rubric,
        responses=2,
        images=(1, 3),
        prompt_tokens=250,
        families=["SA", "MSR"],
        jitter=0.3,
        seed=1,
    )
    for target in ("score", "rationale_score"):
        batch = JudgeCollator(processor)(btd.sft_examples(items, rubric, target, 12, 0)[:5])
        with torch.no_grad():
            stock = float(btd.loss_all(model, batch))
            ours = float(btd.loss_labels_only(model, btd.right_align(batch)))
        assert abs(stock - ours) < 1e-4, (target, stock, ours)


def test_flop_model_matches_the_model(bs, tiny_parts):
    _, _, config, model = tiny_parts
    counts = bs.param_counts(config)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    fm = bs.flop_model(config, counts)
    # Attention term: causal, each query sees the cached keys plus those up to itself.
    n, c = 5, 7
    per_query = sum(c + i + 1 for i in range(n))
    assert fm.lm_attention(n, c) == 4 * fm.lm_layers * fm.attn_dim * per_query
    assert fm.lm(n, c, 2) == 2 * fm.lm_params * n + fm.lm_attention(n, c) + 2 * 2 * fm.head_params
    assert fm.vit_tokens == (56 // 14) ** 2 + 1 and fm.tile_tokens == 4


def test_4b_shape_is_a_4b_judge(bs, rubric):
    shape = bs.SHAPES["4b"]
    processor = bs.build_processor(shape, 1, rubric)
    assert processor.image_seq_length == 256
    config = bs.build_config(shape, processor)
    counts = bs.param_counts(config)  # on the meta device: no memory
    assert 3.9e9 < counts["total"] < 4.1e9
    assert 0.29e9 < counts["vision_tower"] < 0.32e9
    assert config.text_config.vocab_size == 151_936 > len(processor.tokenizer)


@pytest.mark.slow
def test_bench_train_tiny_all_configs(bt, tmp_path):
    import torch

    if torch.cuda.is_available():  # build_model puts 4-bit models on the GPU; run with CUDA_VISIBLE_DEVICES=
        pytest.skip("CPU test: hide the GPU (CUDA_VISIBLE_DEVICES=) to run it on a GPU machine")
    argv = [
        "--shape",
        "tiny",
        "--steps",
        "2",
        "--warmup-steps",
        "1",
        "--batch-size",
        "2",
        "--prompt-tokens",
        "250",
        "--workers",
        "0",
        "--device",
        "cpu",
        "--configs",
        "lora,lora-gc,qlora,qlora-gc,lora-gc-packed",
        "--repeats",
        "2",
        "--allow-dirty",
        "--out",
        str(tmp_path),
    ]
    assert bt.main(argv) == 0
    (path,) = tmp_path.glob("bench_train_cpu_*.json")  # one file, rewritten after each repeat
    d = json.loads(path.read_text())
    assert d["command"] == "python scripts/bench_train.py " + " ".join(argv)
    for key in ("date", "device", "versions", "config", "flop_formula", "results"):
        assert key in d, key
    assert set(d["results"]) == {"lora", "lora-gc", "qlora", "qlora-gc", "lora-gc-packed"}
    # Every configuration ran once per repeat; the reported run is the median's, every time is kept.
    assert d["repeats_done"] == 2 and d["complete"] and d["protocol"]["met"] is False  # 2 < 3 repeats
    for r in d["results"].values():
        assert r["repeats_done"] == 2 and len(r["seconds_all"]) == 2 and r["seconds"] in r["seconds_all"]
    # Packed: nothing padded, the same examples (tokens and labels) as the padded run of the same step count.
    packed, padded = d["results"]["lora-gc-packed"], d["results"]["lora-gc"]
    assert packed["packing"] and not padded["packing"] and packed["padding_fraction"] == 0
    assert packed["tokens"] == padded["tokens"] and packed["label_tokens"] == padded["label_tokens"]
    assert packed["flops"] == pytest.approx(padded["flops"])
    assert (
        d["config"]["liger_kernel"] is None and not d["config"]["liger_kernel_used"]
    )  # auto: off on the CPU
    for name, r in d["results"].items():
        assert "error" not in r, (name, r)
        for key in (
            "tokens_per_s",
            "examples_per_s",
            "tflops_per_s",
            "mfu",
            "mfu_6n",
            "peak_allocated_gib",
            "peak_reserved_gib",
            "trainable_params",
            "seconds_per_step",
            "loss_first",
            "loss_last",
        ):
            assert key in r, (name, key)
        assert r["steps"] == 2 and r["tokens"] > 0 and r["loss_finite"]
        # Where a lease's untimed time goes (loader workers, first compiles) is kept beside the timed steps.
        assert r["setup_and_warmup_seconds"] > 0
        assert r["mfu"] is None and r["peak_allocated_gib"] is None and r["peak_reserved_gib"] is None
        assert r["flops_6n"] > r["flops"] > 0
        assert r["gradient_checkpointing"] == ("-gc" in name)
        assert r["quantization"] == ("4bit" if name.startswith("qlora") else "none")
    # LoRA adapters only: the same trainable count whether the base is bf16/fp32 or 4-bit.
    assert d["results"]["lora"]["trainable_params"] == d["results"]["qlora"]["trainable_params"]


def test_bench_prefix_times_both_sides_through_the_public_api(tmp_path, capsys):
    # bench_prefix uses `judge`'s public API only: the shared and unshared judges score the same items.
    imported = re.findall(
        r"^\s*(?:from|import) (judge[\w.]*)", (SCRIPTS / "bench_prefix.py").read_text(), re.M
    )
    assert imported and set(imported) == {"judge"}, imported
    bp = _load("bench_prefix")
    assert (
        bp.main(["--limit", "3", "--repeats", "1", "--threads", "1", "--allow-dirty", "--out", str(tmp_path)])
        == 0
    )
    out = capsys.readouterr().out
    assert "| shared    |" in out and "| unshared  |" in out and "shared prefix:" in out
    (path,) = tmp_path.glob("bench_prefix_cpu_*.json")
    result = json.loads(path.read_text())
    assert result["responses"] == 3 and result["criterion_scores"] == 21  # 3 responses x 7 criteria
    assert result["speedup"] == pytest.approx(
        result["results"]["unshared"]["seconds_median"] / result["results"]["shared"]["seconds_median"]
    )


@pytest.mark.slow
def test_bench_repro_measures_every_path_and_the_reproducible_mode_is_exact(tmp_path):
    """bench_repro.py end to end on the CPU (tiny judge in bfloat16, the API, judge-score and a real
    judge-serve): every comparison is in the JSON per criterion, the reproducible mode's paths and batchings
    are bit-identical, and its throughput is measured against the default's."""
    br = _load("bench_repro")
    argv = ["--dtypes", "bfloat16", "--responses", "5", "--targets", "3", "--repeats", "1", "--threads", "1",
            "--compare-readout", "--full",
            "--allow-dirty", "--out", str(tmp_path)]  # fmt: skip
    assert br.main(argv) == 0
    (path,) = tmp_path.glob("bench_repro_cpu_*.json")
    d = json.loads(path.read_text())
    assert d["command"] == "python scripts/bench_repro.py " + " ".join(argv)
    assert set(d["runs"]) == {"bfloat16/default", "bfloat16/reproducible"}
    n = d["config"]["scores_measured"]
    assert n == 21  # 3 responses x 7 criteria
    for run, r in d["runs"].items():
        comps = r["comparisons"]
        assert len([c for c in comps if c.endswith("vs float32 reference")]) >= 6, run
        for by in comps.values():
            assert by["all"]["n"] == n and set(by["all"]) == {"n", "p50", "p99", "max", "identical"}
            assert sum(s["n"] for c, s in by.items() if c != "all") == n
        if run.endswith("reproducible"):
            for comp in (
                "shared, batched vs shared, alone",
                "judge-score vs shared, alone",
                "judge-serve vs judge-score",
            ):
                assert comps[comp]["all"]["max"] == 0 and comps[comp]["all"]["identical"] == n, (run, comp)
    # The model's own bf16 read-out is further from float32 than the float32 read-out.
    bf = d["runs"]["bfloat16/default"]["comparisons"]
    ours, theirs = (
        bf["shared, alone vs float32 reference"]["all"],
        bf["shared, alone, model read-out vs float32 reference"]["all"],
    )
    assert ours["p50"] < theirs["p50"]
    t = d["throughput"]["bfloat16"]
    assert t["default"]["items_per_s"] > 0 and t["reproducible"]["items_per_s"] > 0


@pytest.mark.slow
def test_bench_e2e_times_judge_score_beside_bench_c_on_the_same_items(tmp_path):
    """bench_e2e.py on the CPU: judge-score (a process of its own, with and without encoding workers, and its
    fixed cost) beside bench_score's mode (c) on the same workload; every score of the command is the
    bench's, to float32 round-off."""
    be = _load("bench_e2e")
    argv = ["--shape", "tiny", "--responses", "6", "--prompt-tokens", "300", "--repeats", "1", "--threads", "1",
            "--workers", "1", "--score-workers", "0,2", "--allow-dirty", "--out", str(tmp_path)]  # fmt: skip
    assert be.main(argv) == 0
    (path,) = tmp_path.glob("bench_e2e_cpu_*.json")
    d = json.loads(path.read_text())
    assert d["command"] == "python scripts/bench_e2e.py " + " ".join(argv)
    # The file is rewritten after every repeat: a run cut short keeps its repeats.
    assert d["repeats_done"] == 1
    res = d["results"]
    assert set(res) == {
        "bench (c)",
        "judge-score, workers 0",
        "judge-score, workers 2",
        "judge-score --limit 1",
    }
    assert res["bench (c)"]["over_bench"] == 1.0
    for run in ("judge-score, workers 0", "judge-score, workers 2"):
        r = res[run]
        assert r["scores_compared"] == d["config"]["criterion_scores"] == 42 and r["scores_missing"] == 0
        assert r["max_abs_diff_vs_bench"] < 1e-5
        assert r["responses_per_s"] == pytest.approx(6 / r["seconds"])
        # The steady rate leaves out the command's fixed cost (imports, loading the model): its --limit 1 run.
        steady = r["seconds"] - res["judge-score --limit 1"]["seconds"]
        assert r["steady_responses_per_s"] == (pytest.approx(5 / steady) if steady > 0 else None)
    with pytest.raises(SystemExit):
        be.main(["--score-workers", "1,x"])


def test_bench_score_budget_ends_cleanly_with_what_it_has(bs, tmp_path):
    """--budget-s stops before a run that would not fit and writes the repeats done; the JSON is one file,
    rewritten after every repeat (so a run killed later keeps them)."""
    argv = ["--shape", "tiny", "--responses", "3", "--prompt-tokens", "250", "--modes", "unshared,shared",
            "--warmup", "1", "--repeats", "5", "--budget-s", "0.01", "--device", "cpu", "--allow-dirty",
            "--out", str(tmp_path)]  # fmt: skip
    assert bs.main(argv) == 0
    (path,) = tmp_path.glob("bench_score_cpu_*.json")
    d = json.loads(path.read_text())
    assert d["complete"] is False and "--budget-s 0.01" in d["stopped"]
    for mode in ("unshared", "shared"):
        assert d["results"][mode]["repeats_done"] == 1 and len(d["results"][mode]["seconds_all"]) == 1
    assert d["protocol"]["met"] is False and d["agreement"]["unshared_vs_shared"]["pairs"] == 21


@pytest.mark.slow
def test_gpu_figures_all_runs_every_step_on_the_cpu(tmp_path):
    """The device script's `all` phase with the tiny shapes on the CPU, as the GPU session will run it at the
    4B and Qwen2.5-VL-3B shapes: every step ends with rc 0, and the archive holds the four JSONs, with the
    figures the goals table needs (packed (c) beside (b) for both shapes, p99 shared vs unshared with both
    read-outs, the reproducible mode's equality and throughput, LoRA with checkpointing, padded and packed,
    QLoRA)."""
    import os
    import subprocess
    import tarfile

    repo = SCRIPTS.parent
    env = dict(os.environ, SHAPE="tiny", QWEN_SHAPE="tiny-qwen2.5-vl", DEVICE="cpu", RESPONSES="4",
               QWEN_RESPONSES="4", REPRO_RESPONSES="3", TARGETS="1", STEPS="1", BATCH="2", WORKERS="1",
               PROMPT_TOKENS="250", BOUND_SCALE="8", SCORE_BUDGET="2000", QWEN_BUDGET="2000", TRAIN_BUDGET="2000",
               PYTHONPATH=str(repo), TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")  # fmt: skip
    # The script's `python3 scripts/bench_*.py` steps forked by the test run's fork server (the variables it
    # exports itself are in env already: the same server for each step).
    env = forkserver.python_on_path(env)
    res = subprocess.run(
        ["bash", "scripts/device/gpu_figures.sh", "all", str(tmp_path)],
        cwd=repo, env=env, capture_output=True, text=True, timeout=3000,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    steps = re.findall(r"^== (\w+)\n\s+rc=(\d+)", res.stdout, re.M)
    assert steps == [
        ("save_model", "0"),
        ("repro", "0"),
        ("score", "0"),
        ("score_qwen", "0"),
        ("train", "0"),
    ], res.stdout[-3000:]
    with tarfile.open(tmp_path / "gpu_all.tgz") as tar:
        names = tar.getnames()
        found = {}
        for n in names:
            for kind in ("bench_repro", "bench_score", "bench_train"):
                if f"results/{kind}_cpu_" in n:
                    d = json.load(tar.extractfile(n))
                    found[kind if kind != "bench_score" else f"{kind}/{d['config']['model']['shape']}"] = d
    assert set(found) == {"bench_repro", "bench_score/tiny", "bench_score/tiny-qwen2.5-vl", "bench_train"}, (
        names
    )
    assert len([n for n in names if n.endswith(".json")]) == 4, names  # this call's files only
    assert {"./save_model.log", "./repro.log", "./score.log", "./score_qwen.log", "./train.log"} <= set(names)
    repro = found["bench_repro"]
    default = repro["runs"]["bfloat16/default"]["comparisons"]
    assert {"unshared, batched vs shared, batched",
            "shared, batched, model read-out vs unshared, batched, model read-out"} <= set(default)  # fmt: skip
    exact = repro["runs"]["bfloat16/reproducible"]["comparisons"]["shared, batched vs shared, alone"]["all"]
    assert exact["max"] == 0 and exact["identical"] == exact["n"] > 0
    assert repro["throughput"]["bfloat16"]["reproducible_over_default"] > 0 and repro["complete"]
    score = found["bench_score/tiny"]
    assert set(score["results"]) == {"unshared", "packed"} and score["complete"]
    assert score["results"]["packed"]["padding_fraction"] == 0
    assert score["agreement"]["unshared_vs_packed"]["max_abs_diff_expected"] < 1e-4
    assert "packed_over_b_responses_per_s" in score["ratios"]
    assert "judge.packed_pass" in score["profile"]["packed"]["spans"]
    qwen = found["bench_score/tiny-qwen2.5-vl"]
    assert set(qwen["results"]) == {"unshared", "packed"} and qwen["complete"]
    assert qwen["config"]["model"]["language"]["type"] == "qwen2_5_vl_text"
    assert qwen["agreement"]["unshared_vs_packed"]["max_abs_diff_expected"] < 1e-4
    assert qwen["results"]["packed"]["flops"] < qwen["results"]["unshared"]["flops"]
    train = found["bench_train"]
    # No card of over 100 GB here: the configs without checkpointing (out of memory on an H100) are left out.
    assert set(train["results"]) == {"lora-gc", "lora-gc-packed", "qlora-gc"} and train["complete"]
    assert all(r["repeats_done"] == 3 for r in train["results"].values())
