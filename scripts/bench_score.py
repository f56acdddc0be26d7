"""Scoring throughput of a 4B-class InternVL judge, three ways side by side in one run.

Builds a randomly initialised ``InternVLForConditionalGeneration`` with the shapes of a
real 4B judge (``--shape 4b``: an InternViT-300M-class vision tower at 448 px and a
3.6B Qwen2-class language model) or the tiny test shapes (``--shape tiny``), and scores
one fixed synthetic workload (random-colour images, prompts padded with words to about
``--prompt-tokens`` tokens, the MMIE rubric's six criteria plus overall per response):

  a. ``mmie``: MMIE-style, one (response, criterion) at a time: generate a rationale of
     exactly ``--new-tokens`` tokens (EOS suppressed, so every run does the same work), then
     one more forward pass to read the score. This *is* ``ExpectedScorer.score_with_rationale``,
     called with ``model.generate`` made to ignore EOS (``min_new_tokens = max_new_tokens``).
     It is slow, so it runs on the first ``--mmie-responses`` responses only; its rates are
     per second and compare directly with the others.
  b. ``unshared``: ``ExpectedScorer.score(share_prefix=False)``, one forward pass per criterion.
  c. ``shared``: ``ExpectedScorer.score(share_prefix=True)`` with ``packed="off"``, the response's
     prefix (with every image) once, each criterion's suffix on a copy of its KV cache; token-budget
     batching.
  c. ``packed``: the same with ``packed="flex"`` (``judge.models.packed``): each forward batch one row,
     the responses' prefixes and suffixes end to end under a prefix-tree FlexAttention mask, positions
     restarting after each prefix; no KV copy, no padding. Charged the same FLOPs as ``shared``.

Every timed run includes encoding (chat template, tokenising, image preprocessing), as
``judge-score`` does; with ``--workers N`` encoding runs in persistent DataLoader worker
processes, started before any timing and overlapped with the GPU. For each mode: responses/s,
criterion scores/s, prefill tokens/s, achieved TFLOP/s and MFU (FLOP count below), peak GPU
memory allocated and reserved (GiB). JSON goes to
``benchmarks/results/bench_score_<device>_<timestamp>.json``.

The protocol for a published figure: at least 128 responses (default 256) and 3 repeats of (b)
and (c), alternating, the median reported (the default), from a committed tree: a tree whose
tracked files differ from its commit is refused unless ``--allow-dirty`` (the JSON records the
commit and ``dirty``). ``--profile`` adds one run of each mode of ``--profile-modes`` under
``torch.profiler``, right after the first repeat: the time of encoding (or waiting for the
workers), the prefix pass, the KV-cache copies, the suffix passes, the packed pass and its block
mask, and the read-out, and the top operators.

Nothing measured is lost to a cut: the table and the JSON (one file, rewritten) come after every
repeat and after the profile, and ``--budget-s`` ends the timed repeats cleanly when the next run of
a mode would not fit (its last time predicts it), writing what it has (``protocol.met`` then says
whether the repeats it finished meet the protocol).

FLOPs (forward; multiply-add = 2; real tokens only, padding never counted), per sequence that
runs ``n`` new tokens over ``c`` tokens already in the KV cache and reads logits at ``k`` positions::

    F_lm(n, c, k)  = 2 * P_lm * n + 4 * L * d_attn * (n*c + n*(n+1)/2) + 2 * d_model * V * k
    F_vit(tiles)   = tiles * (2 * P_vit * T + 4 * L_vit * d_vit * T**2 + 2 * P_proj * T_llm)

``P_lm``: parameters of the decoder layers and final norm (no embeddings, no LM head);
``L``, ``d_attn`` (= heads * head_dim), ``d_model``, ``V``: the language model's layers,
attention width, hidden size and vocabulary; causal attention counts only the keys each
query sees. ``P_vit``, ``L_vit``, ``d_vit``: the vision tower's parameters (embeddings
included: the patch embedding is a matmul), layers and width; ``T`` = patches per tile + 1
(the class token), full bidirectional attention; ``P_proj`` the projector's parameters and
``T_llm`` the tokens a tile becomes (256 at 448 px). Each mode is charged the FLOPs of the
algorithm it runs: (b) re-runs the prompt and the images for every criterion, (c) runs the
prefix and the images once per response; (a) counts the generation's prefill, one
``F_lm(1, c, 1)`` per decoded token, and the read-out pass (images again). MFU = FLOPs /
seconds / peak, with the peak bf16 dense rate of the GPU (H100 SXM and H200: 989.4 TFLOP/s;
``--peak-tflops`` to override); null on the CPU.

    python scripts/bench_score.py --shape 4b                           # on a GPU: the real measurement
    python scripts/bench_score.py --shape 4b --describe                # config and parameter counts only
    python scripts/bench_score.py --shape tiny --responses 8 --new-tokens 4 --prompt-tokens 300
    python scripts/bench_score.py --shape 4b --modes unshared,shared,packed --responses 128 --budget-s 200
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import math
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: bf16 dense peak of the GPUs this is meant for, in TFLOP/s (H100 SXM datasheet; the H200 has the same chip).
PEAK_BF16_TFLOPS = {
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.4,
    "H200": 989.4,
    "GH200": 989.4,
    "A100": 312.0,
}

FILLER_WORDS = (
    "the story then shows a small red house near green trees while two children walk to the river and count "
    "seven stones one by one before the light fades so they build a fire and talk about the next day first "
    "cut the paper into squares then fold each square twice and glue the corners together carefully the "
    "answer is twelve because three rows of four make twelve in total picture matches text colour blue yellow "
    "method step clear practical creative image shows circle square triangle star friend forest morning"
).split()


# ----------------------------------------------------------------------------- model shapes
@dataclass(frozen=True)
class Shape:
    """The judge's shapes: an InternViT-style vision tower, the pixel-shuffle projector, a Qwen2 LM."""

    name: str
    vocab_size: int  #: the model's vocabulary (the embedding may be larger than the tokenizer)
    text_hidden: int
    text_layers: int
    text_heads: int
    text_kv_heads: int
    text_intermediate: int
    tie_word_embeddings: bool
    vision_hidden: int
    vision_layers: int
    vision_heads: int
    vision_intermediate: int
    vision_attention_bias: bool
    image_size: int
    patch_size: int
    max_positions: int
    rope_theta: float = 1_000_000.0

    @property
    def tile_tokens(self) -> int:
        """Language-model tokens one image tile becomes (pixel shuffle at ratio 0.5)."""
        return (self.image_size // self.patch_size) ** 2 // 4


SHAPES = {
    # InternViT-300M (InternVL2/3's 300M tower: 1024 wide, 24 layers, 16 heads, MLP 4096, qkv bias) at 448 px,
    # and a 3.6B Qwen2-class LM (Qwen3-4B's widths with Qwen2 blocks: 2560 wide, 36 layers, 20 heads of 128,
    # 4 KV heads, MLP 9728, Qwen2.5's 151,936-token vocabulary, tied embeddings as in Qwen2.5-3B).
    "4b": Shape(
        "4b",
        vocab_size=151_936,
        text_hidden=2560,
        text_layers=36,
        text_heads=20,
        text_kv_heads=4,
        text_intermediate=9728,
        tie_word_embeddings=True,
        vision_hidden=1024,
        vision_layers=24,
        vision_heads=16,
        vision_intermediate=4096,
        vision_attention_bias=True,
        image_size=448,
        patch_size=14,
        max_positions=32_768,
    ),
    # The tests' tiny judge (judge.testing.tiny.TinySpec's shapes).
    "tiny": Shape(
        "tiny",
        vocab_size=3000,
        text_hidden=128,
        text_layers=4,
        text_heads=4,
        text_kv_heads=2,
        text_intermediate=256,
        tie_word_embeddings=True,
        vision_hidden=64,
        vision_layers=2,
        vision_heads=2,
        vision_intermediate=128,
        vision_attention_bias=False,
        image_size=56,
        patch_size=14,
        max_positions=8192,
    ),
}
# The tiny judge with the 4B shape's 36 language-model layers: how bf16 round-off grows with depth, on the CPU
# (issue 42, Part A.2). Widths stay tiny so that a float32 reference and every path run in minutes.
SHAPES["tiny36"] = dataclasses.replace(SHAPES["tiny"], name="tiny36", text_layers=36)


def build_processor(shape: Shape, max_tiles: int, rubric="mmie"):
    """The tiny judge's tokenizer (trained on the rubric's prompts) with a processor at the shape's tile size."""
    from judge.models.loading import build_tiny_processor
    from judge.testing.tiny import TinySpec

    spec = TinySpec(image_size=shape.image_size, patch_size=shape.patch_size, max_tiles=max_tiles)
    processor = build_tiny_processor(spec, rubric)
    assert processor.image_seq_length == shape.tile_tokens, (processor.image_seq_length, shape.tile_tokens)
    return processor


def build_config(shape: Shape, processor):
    """An ``InternVLConfig`` of ``shape`` whose special tokens are the processor's (vocab padded up)."""
    from transformers import InternVLConfig

    tok = processor.tokenizer
    return InternVLConfig(
        vision_config=dict(
            hidden_size=shape.vision_hidden,
            num_hidden_layers=shape.vision_layers,
            num_attention_heads=shape.vision_heads,
            intermediate_size=shape.vision_intermediate,
            image_size=shape.image_size,
            patch_size=shape.patch_size,
            attention_bias=shape.vision_attention_bias,
        ),
        text_config=dict(
            model_type="qwen2",
            vocab_size=max(shape.vocab_size, len(tok)),
            hidden_size=shape.text_hidden,
            num_hidden_layers=shape.text_layers,
            num_attention_heads=shape.text_heads,
            num_key_value_heads=shape.text_kv_heads,
            intermediate_size=shape.text_intermediate,
            max_position_embeddings=shape.max_positions,
            rope_theta=shape.rope_theta,
            tie_word_embeddings=shape.tie_word_embeddings,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=None,
        ),
        image_token_id=processor.image_token_id,
        image_seq_length=processor.image_seq_length,
        downsample_ratio=0.5,
        tie_word_embeddings=shape.tie_word_embeddings,
    )


def build_model(config, processor, device: str, dtype, attn: str, seed: int = 0):
    """A randomly initialised model, created directly on ``device`` in ``dtype`` (no fp32 copy on the host)."""
    import torch
    from transformers import InternVLForConditionalGeneration

    torch.manual_seed(seed)
    with torch.device(device):
        model = InternVLForConditionalGeneration._from_config(config, dtype=dtype, attn_implementation=attn)
    model.generation_config.eos_token_id = processor.tokenizer.eos_token_id
    model.generation_config.pad_token_id = processor.tokenizer.pad_token_id
    return model.eval()


@dataclass(frozen=True)
class FlopModel:
    """The FLOP count of the module docstring, from the model's real parameter counts."""

    lm_params: int  #: decoder layers + final norm (non-embedding)
    lm_layers: int
    attn_dim: int  #: heads * head_dim
    head_params: int  #: d_model * vocab (the LM head's matmul, tied or not)
    vit_params: int
    vit_layers: int
    vit_dim: int
    vit_tokens: int  #: per tile, class token included
    proj_params: int
    tile_tokens: int  #: LM tokens per tile

    def lm(self, new: int, cached: int = 0, logits: int = 1) -> float:
        ctx = new * cached + new * (new + 1) / 2
        return (
            2.0 * self.lm_params * new
            + 4.0 * self.lm_layers * self.attn_dim * ctx
            + 2.0 * self.head_params * logits
        )

    def lm_attention(self, new: int, cached: int = 0) -> float:
        return 4.0 * self.lm_layers * self.attn_dim * (new * cached + new * (new + 1) / 2)

    def vision(self, tiles: int) -> float:
        per_tile = (
            2.0 * self.vit_params * self.vit_tokens
            + 4.0 * self.vit_layers * self.vit_dim * self.vit_tokens**2
            + 2.0 * self.proj_params * self.tile_tokens
        )
        return tiles * per_tile


def param_counts(config) -> dict[str, int]:
    """Parameter counts by part, from a model built on the meta device (no memory, no init)."""
    import torch
    from transformers import InternVLForConditionalGeneration

    with torch.device("meta"):
        m = InternVLForConditionalGeneration(config)
    out = {"vision_tower": 0, "projector": 0, "lm_embedding": 0, "lm_layers": 0, "lm_head_untied": 0}
    for name, p in m.named_parameters():  # tied weights are listed once
        if ".vision_tower." in f".{name}":
            key = "vision_tower"
        elif "multi_modal_projector" in name:
            key = "projector"
        elif "embed_tokens" in name:
            key = "lm_embedding"
        elif name.startswith("lm_head"):
            key = "lm_head_untied"
        else:
            key = "lm_layers"
        out[key] += p.numel()
    out["language_model"] = out["lm_embedding"] + out["lm_layers"] + out["lm_head_untied"]
    out["total"] = sum(out[k] for k in ("vision_tower", "projector", "language_model"))
    return out


def flop_model(config, counts: dict[str, int]) -> FlopModel:
    t, v = config.text_config, config.vision_config
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
    image = v.image_size[0] if isinstance(v.image_size, list | tuple) else v.image_size
    patch = v.patch_size[0] if isinstance(v.patch_size, list | tuple) else v.patch_size
    return FlopModel(
        lm_params=counts["lm_layers"],
        lm_layers=t.num_hidden_layers,
        attn_dim=t.num_attention_heads * head_dim,
        head_params=t.hidden_size * t.vocab_size,
        vit_params=counts["vision_tower"],
        vit_layers=v.num_hidden_layers,
        vit_dim=v.hidden_size,
        vit_tokens=(image // patch) ** 2 + 1,
        proj_params=counts["projector"],
        tile_tokens=config.image_seq_length,
    )


def attn_used(model) -> dict:
    """The attention implementation each part of a loaded model really uses."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = base.config
    return {
        part: getattr(c, "_attn_implementation", None)
        for part, c in (("text", cfg.text_config), ("vision", cfg.vision_config))
    }


def describe(shape: Shape, config, counts: dict[str, int]) -> dict:
    t, v = config.text_config, config.vision_config
    return {
        "shape": shape.name,
        "vision": {
            "hidden": v.hidden_size,
            "layers": v.num_hidden_layers,
            "heads": v.num_attention_heads,
            "intermediate": v.intermediate_size,
            "image_size": shape.image_size,
            "patch_size": shape.patch_size,
            "attention_bias": v.attention_bias,
            "tokens_per_tile": config.image_seq_length,
        },
        "language": {
            "type": t.model_type,
            "hidden": t.hidden_size,
            "layers": t.num_hidden_layers,
            "heads": t.num_attention_heads,
            "kv_heads": t.num_key_value_heads,
            "intermediate": t.intermediate_size,
            "vocab": t.vocab_size,
            "tie_word_embeddings": shape.tie_word_embeddings,
        },
        "params": counts,
    }


def print_description(d: dict) -> None:
    v, lm, p = d["vision"], d["language"], d["params"]
    print(
        f"shape {d['shape']}: vision {v['layers']}x{v['hidden']} (heads {v['heads']}, MLP {v['intermediate']}) "
        f"at {v['image_size']} px / patch {v['patch_size']} -> {v['tokens_per_tile']} tokens per tile; "
        f"LM {lm['type']} {lm['layers']}x{lm['hidden']} (heads {lm['heads']}, kv {lm['kv_heads']}, "
        f"MLP {lm['intermediate']}, vocab {lm['vocab']}, tied {lm['tie_word_embeddings']})"
    )
    print("params: " + ", ".join(f"{k} {_human(n)}" for k, n in p.items()))


def _human(n: float) -> str:
    for unit, f in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= f:
            return f"{n / f:.3g}{unit}"
    return f"{n:g}"


# ----------------------------------------------------------------------------- workload
def parse_range(text: str) -> tuple[int, int]:
    """``"3"`` -> (3, 3); ``"2-3"`` -> (2, 3)."""
    lo, _, hi = str(text).partition("-")
    lo_i, hi_i = int(lo), int(hi or lo)
    if lo_i < 0 or hi_i < lo_i:
        raise argparse.ArgumentTypeError(f"bad range {text!r}")
    return lo_i, hi_i


@dataclass
class Item:
    """One synthetic response: its content (images as placeholders), its PIL images, its task family."""

    key: str
    family: str
    question: list
    response: list
    reference: list | None
    images: list
    score: int  #: a target score for training examples


def _words(rng, n: int) -> str:
    return " ".join(FILLER_WORDS[i] for i in rng.integers(0, len(FILLER_WORDS), size=n)) if n > 0 else ""


def _make_item(i: int, family: str, n_images: int, n_words: int, seed: int, rubric) -> Item:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng([seed, i])
    images = []
    for _ in range(n_images):
        w, h = (int(x) for x in rng.integers(256, 768, size=2))
        images.append(Image.new("RGB", (w, h), tuple(int(c) for c in rng.integers(0, 256, size=3))))
    q_images = 1 if n_images >= 2 else 0
    q_words = n_words // 4
    question = [{"type": "text", "text": f"Task {i}: " + _words(rng, q_words)}]
    question += [{"type": "image", "image": f"q{i}_{k}.png"} for k in range(q_images)]
    r_images = n_images - q_images
    chunks = max(r_images, 1)
    per = (n_words - q_words) // chunks
    response = []
    for k in range(chunks):
        response.append(
            {"type": "text", "text": _words(rng, per if k < chunks - 1 else n_words - q_words - per * k)}
        )
        if k < r_images:
            response.append({"type": "image", "image": f"r{i}_{k}.png"})
    reference = (
        [{"type": "text", "text": "The answer is 12."}] if rubric.family(family).uses_reference else None
    )
    lo, hi = rubric.scale.min, rubric.scale.max
    return Item(f"r{i:05d}", family, question, response, reference, images, int(rng.integers(lo, hi + 1)))


def prompts_for(item: Item, rubric, target_format: str = "score") -> tuple[list[str], list[list[dict]]]:
    from judge.core.template import build_judge_prompt

    crits = rubric.family(item.family).criterion_ids
    msgs = [
        build_judge_prompt(
            rubric, item.family, c, item.question, item.response, item.reference, target_format
        ).messages
        for c in crits
    ]
    return list(crits), msgs


def request_for(item: Item, rubric, target_format: str = "score"):
    from judge.models.readout import ScoreRequest

    crits, msgs = prompts_for(item, rubric, target_format)
    return ScoreRequest(key=item.key, criteria=crits, prompts=msgs, images=list(item.images))


def build_workload(
    processor,
    rubric,
    *,
    responses: int,
    images: tuple[int, int],
    prompt_tokens: int,
    families: list[str],
    jitter: float,
    seed: int,
    target_format: str = "score",
) -> list[Item]:
    """``responses`` items whose criterion prompts average about ``prompt_tokens`` tokens (images expanded).

    Words per item are calibrated per family from two encodings (0 and 400 filler words), then
    each item's target length is drawn uniformly within +-``jitter`` of ``prompt_tokens``.
    """
    import numpy as np

    from judge.models.readout import encode_prompts

    def mean_len(item: Item) -> float:
        _, msgs = prompts_for(item, rubric, target_format)
        ids, _ = encode_prompts(processor, msgs, item.images)
        return statistics.fmean(len(x) for x in ids)

    rng = np.random.default_rng(seed)
    calib = {}
    for fam in families:
        base = mean_len(_make_item(0, fam, images[1], 0, seed, rubric))
        more = mean_len(_make_item(0, fam, images[1], 400, seed, rubric))
        calib[fam] = (base, max((more - base) / 400, 1e-3))
    items = []
    for i in range(responses):
        fam = families[i % len(families)]
        n_img = int(rng.integers(images[0], images[1] + 1))
        base, per_word = calib[fam]
        image_delta = (images[1] - n_img) * (processor.image_seq_length + 2)  # fewer images: more words
        target = prompt_tokens * (1 + jitter * (2 * rng.random() - 1))
        words = max(0, round((target - base + image_delta) / per_word))
        items.append(_make_item(i, fam, n_img, words, seed, rubric))
    return items


# ----------------------------------------------------------------------------- timing helpers
def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def reset_peak(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


GIB = 2**30


def peak_memory(device: str) -> dict:
    """Peak GPU memory since the last :func:`reset_peak`: allocated by tensors and reserved by the caching
    allocator (what the process holds from the GPU, and what an out-of-memory error is about), in bytes
    and GiB. None on the CPU."""
    import torch

    if not device.startswith("cuda"):
        return {
            k: None
            for k in (
                "peak_allocated_bytes",
                "peak_allocated_gib",
                "peak_reserved_bytes",
                "peak_reserved_gib",
            )
        }
    alloc, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    return {
        "peak_allocated_bytes": alloc,
        "peak_allocated_gib": alloc / GIB,
        "peak_reserved_bytes": reserved,
        "peak_reserved_gib": reserved / GIB,
    }


# ----------------------------------------------------------------------------- the protocol
#: What a published figure needs (benchmarks/README.md): enough responses that batching and workers reach
#: a steady state, several repeats (the median is reported), and a committed tree.
MIN_RESPONSES = 128
MIN_REPEATS = 3


def source_state(repo: Path = REPO) -> dict:
    """The commit the figures come from and whether tracked files differ from it (``dirty``)."""
    from judge.models.card import git_commit

    commit = git_commit(repo)
    return {
        "git_commit": commit.removesuffix("-dirty") if commit else None,
        "dirty": bool(commit and commit.endswith("-dirty")),
    }


def require_clean(state: dict, allow_dirty: bool) -> None:
    """Refuse to time a tree whose tracked files differ from its commit: the figures could not be traced to
    code. ``--allow-dirty`` times it anyway; the JSON then says ``dirty: true``."""
    if state["dirty"] and not allow_dirty:
        raise SystemExit(
            f"the working tree differs from commit {state['git_commit']}: commit first, so the figures can be "
            "traced to code (or pass --allow-dirty; the JSON then records dirty: true)"
        )
    if state["dirty"]:
        print(f"WARNING: timing a dirty tree (commit {state['git_commit']} plus changes)", file=sys.stderr)


def protocol(responses: int, repeats: int, quiet: bool = False) -> dict:
    """Whether a run meets the protocol for published figures; a warning on stderr when not (unless ``quiet``)."""
    ok = responses >= MIN_RESPONSES and repeats >= MIN_REPEATS
    if not ok and not quiet:
        print(
            f"WARNING: {responses} responses and {repeats} repeats are below the protocol for published figures "
            f"(>= {MIN_RESPONSES} responses, >= {MIN_REPEATS} repeats): a test of the script, not a measurement",
            file=sys.stderr,
        )
    return {"min_responses": MIN_RESPONSES, "min_repeats": MIN_REPEATS, "met": ok}


def peak_tflops(device: str, override: float | None) -> tuple[float | None, str | None]:
    """(peak bf16 dense TFLOP/s, GPU name); (None, None) on the CPU."""
    import torch

    if not device.startswith("cuda"):
        return override, None
    name = torch.cuda.get_device_name(torch.device(device))
    if override:
        return override, name
    for key, value in PEAK_BF16_TFLOPS.items():  # longest names first in the table
        if key in name:
            return value, name
    return None, name


def machine_facts(device: str, peak: float | None, gpu: str | None) -> dict:
    import torch

    facts = {
        "type": "cuda" if device.startswith("cuda") else "cpu",
        "name": gpu or _cpu_name(),
        "peak_bf16_tflops": peak,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()),
    }
    if device.startswith("cuda"):
        facts["cuda"] = torch.version.cuda
        facts["gpu_memory_gib"] = torch.cuda.get_device_properties(torch.device(device)).total_memory / GIB
    return facts


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def versions() -> dict:
    import torch

    from judge.models.card import library_versions

    v = library_versions()
    v["torch_cuda"] = torch.version.cuda
    return v


def rates(seconds: float, flops: float, peak: float | None) -> dict:
    tflops = flops / seconds / 1e12 if seconds > 0 else None
    return {"flops": flops, "tflops_per_s": tflops, "mfu": (tflops / peak) if (peak and tflops) else None}


def write_result(out_dir: str, name: str, device: str, result: dict) -> Path:
    from judge.core.atomic import write_json

    tag = device_tag(device, result.get("device", {}).get("name"))
    path = Path(out_dir) / f"{name}_{tag}_{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, result)
    return path


def device_tag(device: str, name: str | None) -> str:
    """``cpu``, or the GPU's name as a file-name part (``h100-80gb-hbm3``); ``cuda`` if it has none."""
    if not device.startswith("cuda"):
        return "cpu"
    if not name:
        return "cuda"
    return "".join(c if c.isalnum() else "-" for c in name.replace("NVIDIA ", "")).strip("-").lower()


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def resolve_dtype(name: str, device: str):
    from judge.models.loading import resolve_dtype as _resolve

    return _resolve(name, device)


# ----------------------------------------------------------------------------- the three modes
@contextlib.contextmanager
def eos_ignored(model, lengths: list[int] | None = None):
    """``model.generate`` always produces ``max_new_tokens`` (``min_new_tokens`` set to it); records lengths."""
    original = model.generate

    def generate(*args, **kwargs):
        kwargs["min_new_tokens"] = kwargs.get("max_new_tokens")
        out = original(*args, **kwargs)
        if lengths is not None:
            lengths.append(out.shape[1] - kwargs["input_ids"].shape[1])
        return out

    model.generate = generate
    try:
        yield
    finally:
        del model.generate


def score_mmie(scorer, requests, new_tokens: int):
    """Mode (a): ``score_with_rationale`` per response (criteria one at a time), EOS ignored."""
    lengths: list[int] = []
    out = []
    with eos_ignored(scorer.model, lengths):
        for r in requests:
            out.append((r, scorer.score_with_rationale(r, max_new_tokens=new_tokens)))
    return out, lengths


class _EncodeSet:
    """A map-style dataset whose items are the requests encoded (``judge.models.readout.encode_request``,
    what ``ExpectedScorer.encode`` does): encoding in DataLoader workers, which need the processor only."""

    def __init__(self, processor, requests):
        self.processor, self.requests = processor, requests

    def __len__(self) -> int:
        return len(self.requests)

    def __getitem__(self, i: int):
        from judge.models.readout import encode_request

        return encode_request(self.processor, self.requests[i])


def _as_list(batch):
    return list(batch)


def auto_chunk(responses: int, workers: int) -> int:
    """Requests per worker chunk: small enough that every worker gets several chunks (16 responses in chunks
    of 64 left one worker encoding everything while the GPU waited), large enough to batch well."""
    return max(4, min(64, math.ceil(responses / (2 * max(workers, 1)))))


class Encoder:
    """Encoding for the timed runs. ``workers == 0``: inline, as ``scorer.score`` does. ``workers > 0``: a
    DataLoader with persistent worker processes, built from the processor before the model exists (nothing
    is forked from a process holding a GPU context) and started by :meth:`start` before any timing, so that
    no run pays for starting processes; each timed run is one pass over it, chunks encoded while the GPU
    scores the previous one."""

    def __init__(self, processor, requests, workers: int, chunk: int):
        self.requests, self.workers, self.chunk = requests, workers, chunk
        self.loader = None
        if workers > 0:
            from torch.utils.data import DataLoader

            self.loader = DataLoader(
                _EncodeSet(processor, requests),
                batch_size=chunk,
                num_workers=workers,
                collate_fn=_as_list,
                prefetch_factor=2,
                persistent_workers=True,
            )

    def start(self) -> float:
        """Start the workers (and encode the first chunk, untimed); returns the seconds it took."""
        if self.loader is None:
            return 0.0
        t0 = time.perf_counter()
        next(iter(self.loader))
        return time.perf_counter() - t0

    def chunks(self, scorer):
        """The requests encoded, chunk by chunk (inline: all at once, as ``scorer.score`` does)."""
        if self.loader is None:
            with _span("judge.encode"):
                encoded = [scorer.encode(r) for r in self.requests]
            yield encoded
        else:
            with _span("judge.wait_for_workers"):
                it = iter(self.loader)
            while True:
                with _span("judge.wait_for_workers"):
                    chunk = next(it, None)
                if chunk is None:
                    return
                yield chunk


def _span(name: str):
    import torch

    return torch.profiler.record_function(name)


def profile_modes(runs: dict, device: str, top: int = 25) -> dict:
    """One run of each mode of ``runs`` (mode -> a callable that scores the workload once) under
    ``torch.profiler``: the time of the scorer's named ranges (``judge.encode`` or
    ``judge.wait_for_workers``, ``judge.prefix_pass``, ``judge.kv_copy``, ``judge.suffix_pass``,
    ``judge.unshared_pass``, ``judge.block_mask``, ``judge.packed_pass``, ``judge.readout*``) and the
    ``top`` operators by self time (device time on a GPU, CPU time otherwise)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    out = {}
    for mode, run in runs.items():
        sync(device)
        t0 = time.perf_counter()
        with profile(activities=activities) as prof:
            with _span("judge.run"):
                run()
            sync(device)
        wall = time.perf_counter() - t0
        events = prof.key_averages()

        def dev(e, total: bool) -> float | None:
            if not cuda:
                return None
            name = "device_time_total" if total else "self_device_time_total"
            return getattr(e, name, 0) / 1e6

        spans = {
            e.key: {"count": e.count, "cpu_s": e.cpu_time_total / 1e6, "device_s": dev(e, True)}
            for e in events
            if e.key.startswith("judge.")
        }
        ops = [e for e in events if not e.key.startswith("judge.") and not e.key.startswith("enumerate(")]
        ops.sort(key=lambda e: (dev(e, False) if cuda else e.self_cpu_time_total / 1e6) or 0, reverse=True)
        out[mode] = {
            "wall_seconds_profiled": wall,
            "spans": spans,
            "top_ops": [
                {
                    "name": e.key,
                    "count": e.count,
                    "self_cpu_s": e.self_cpu_time_total / 1e6,
                    "self_device_s": dev(e, False),
                }
                for e in ops[:top]
            ],
        }
    return out


def print_profile(profiles: dict) -> None:
    for mode, prof in profiles.items():
        print(f"\nprofile of one {mode} run ({prof['wall_seconds_profiled']:.2f} s under the profiler)")
        print("| range | count | CPU s | device s |")
        print("|---|---|---|---|")
        for name, r in sorted(prof["spans"].items(), key=lambda kv: -kv[1]["cpu_s"]):
            print(f"| {name} | {r['count']} | {r['cpu_s']:.3f} | {_fmt(r['device_s'], '.3f')} |")
        print("| top operator (self time) | count | CPU s | device s |")
        for op in prof["top_ops"][:10]:
            print(
                f"| {op['name'][:60]} | {op['count']} | {op['self_cpu_s']:.3f} | {_fmt(op['self_device_s'], '.3f')} |"
            )


def score_judge(scorer, encoder: Encoder, *, share_prefix: bool, batch_tokens: int, batch_size: int):
    """Modes (b) and (c): every request of ``encoder``, encoded as it says, scored in token-budget batches."""
    out = []
    for encoded in encoder.chunks(scorer):
        for batch in scorer.score_encoded(
            encoded, share_prefix=share_prefix, batch_tokens=batch_tokens, max_batch_size=batch_size
        ):
            out.extend(batch)
    return out


def workload_counts(
    encoded,
    fm: FlopModel,
    share_prefix: bool,
    batch_tokens: int,
    batch_size: int,
    chunk: int | None,
    packed: bool = False,
) -> dict:
    """Prefill tokens, FLOPs and tokens processed with padding for mode (b) or (c) over ``encoded``
    (``packed``: the packed layout's rows; the same FLOPs as the KV copy, no padding)."""
    from judge.models.batching import batch_cost, kept_prefix_len, pack

    tokens = flops = tiles = 0
    for e in encoded:
        n_tiles = 0 if e.pixel_values is None else int(e.pixel_values.shape[0])
        if share_prefix:
            p = kept_prefix_len(e)
            tiles += n_tiles
            flops += fm.vision(n_tiles) + fm.lm(p, 0, 1)
            tokens += p
            for ids in e.input_ids:
                flops += fm.lm(len(ids) - p, p, 1)
                tokens += len(ids) - p
        else:
            for ids in e.input_ids:
                tiles += n_tiles
                flops += fm.vision(n_tiles) + fm.lm(len(ids), 0, 1)
                tokens += len(ids)
    groups = [encoded] if not chunk else [encoded[i : i + chunk] for i in range(0, len(encoded), chunk)]
    padded = forward_batches = 0
    for g in groups:
        for b in pack(g, share_prefix, batch_tokens, batch_size, packed=packed):
            padded += batch_cost(b, share_prefix, packed)
            forward_batches += 1
    return {
        "prefill_tokens": tokens,
        "tiles": tiles,
        "flops": flops,
        "tokens_with_padding": padded,
        "padding_fraction": 1 - tokens / padded if padded else None,
        "batches": forward_batches,
    }


def mmie_counts(scorer, results, lengths: list[int], fm: FlopModel) -> dict:
    """Tokens and FLOPs of mode (a): per criterion, generation (prefill + decode) and the read-out pass."""
    from judge.core.template import SCORE_CUE

    tok = scorer.tokenizer
    prefill = decode = tiles = 0
    flops = 0.0
    it = iter(lengths)
    for req, scores in results:
        enc = scorer.encode(req)
        n_tiles = 0 if enc.pixel_values is None else int(enc.pixel_values.shape[0])
        for ids, s in zip(enc.input_ids, scores, strict=True):
            n_new = next(it)
            L = len(ids)
            cont = len(tok(s.rationale + "\n" + SCORE_CUE, add_special_tokens=False)["input_ids"])
            flops += fm.vision(n_tiles) + fm.lm(L, 0, 1)  # generation's prefill
            flops += sum(fm.lm(1, L + j, 1) for j in range(n_new - 1))  # decoding
            flops += fm.vision(n_tiles) + fm.lm(L + cont, 0, 1)  # the read-out pass
            prefill += L + L + cont
            decode += max(n_new - 1, 0)
            tiles += 2 * n_tiles
    return {
        "prefill_tokens": prefill,
        "decode_tokens": decode,
        "generated_tokens": sum(lengths),
        "tiles": tiles,
        "flops": flops,
    }


def _scores_by_key(results) -> dict:
    return {(r.key, c): s for r, scores in results for c, s in zip(r.criteria, scores, strict=True)}


def agreement(x, y) -> dict:
    common = sorted(set(x) & set(y))
    if not common:
        return {"pairs": 0, "max_abs_diff_expected": None, "max_abs_diff_distribution": None}
    de = max(abs(x[k].expected - y[k].expected) for k in common)
    dd = max(abs(p - q) for k in common for p, q in zip(x[k].distribution, y[k].distribution, strict=True))
    return {
        "pairs": len(common),
        "max_abs_diff_expected": de,
        "max_abs_diff_distribution": dd,
        "mean_abs_diff_expected": statistics.fmean(abs(x[k].expected - y[k].expected) for k in common),
    }


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    from judge.models import BATCH_TOKENS

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--shape", choices=sorted(SHAPES), default="4b")
    p.add_argument("--describe", action="store_true", help="print the config and parameter counts, and stop")
    p.add_argument(
        "--encode-only",
        action="store_true",
        help="build the workload and time its encoding on the CPU only (no model; any shape)",
    )
    p.add_argument("--responses", type=int, default=256, help="responses in the workload (default 256)")
    p.add_argument(
        "--images", type=parse_range, default=(2, 3), help="images per response, N or LO-HI (default 2-3)"
    )
    p.add_argument(
        "--prompt-tokens",
        type=int,
        default=1500,
        help="mean criterion-prompt length in tokens, images expanded (default 1500)",
    )
    p.add_argument("--jitter", type=float, default=0.15, help="prompt lengths vary within +-this fraction")
    p.add_argument("--families", default="SA,PBL,MSR", help="task families, cycled over responses")
    p.add_argument(
        "--max-tiles", type=int, default=1, help="tiles per image (1: one 448 px tile, 256 tokens)"
    )
    p.add_argument(
        "--modes",
        default="mmie,unshared,shared",
        help="any of mmie, unshared, shared (KV copy), packed (one packed pass, FlexAttention)",
    )
    p.add_argument("--new-tokens", type=int, default=256, help="rationale length in mode (a) (default 256)")
    p.add_argument(
        "--mmie-responses",
        type=int,
        default=4,
        help="responses mode (a) runs (it is slow; its rates are per second; default 4)",
    )
    p.add_argument(
        "--batch-tokens", type=int, default=BATCH_TOKENS, help="token budget per forward pass (b, c)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="most sequences per forward pass (b, c)")
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="persistent DataLoader workers that encode while the GPU scores, started before any timing "
        "(0: encode inline, as scorer.score)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        help="requests per worker chunk (with --workers; default: responses / (2 x workers), 4 to 64)",
    )
    p.add_argument("--warmup", type=int, default=8, help="responses scored once, untimed, before (b) and (c)")
    p.add_argument(
        "--repeats",
        type=int,
        default=MIN_REPEATS,
        help=f"timed runs of (b) and (c) each, alternating; the median is reported (default {MIN_REPEATS})",
    )
    p.add_argument(
        "--allow-dirty",
        action="store_true",
        help="time a working tree whose tracked files differ from its commit (the JSON says dirty: true)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="after the first timed repeat, one more run of each of --profile-modes under torch.profiler: "
        "where the time goes (encoding, prefix pass, KV-cache copies, suffix passes, packed pass, read-out, "
        "top operators), printed and in the JSON",
    )
    p.add_argument(
        "--profile-modes",
        default="shared,packed",
        help="the modes --profile runs (default shared,packed: (b) is plain prefill)",
    )
    p.add_argument(
        "--budget-s",
        type=float,
        help="seconds for the timed repeats and the profile, from the first timed run: a run that would "
        "not fit (by its mode's last time) is not started, and the JSON keeps what finished",
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", help="auto: bfloat16 on a GPU, float32 on the CPU")
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager", "flash_attention_2"])
    p.add_argument("--peak-tflops", type=float, help="override the GPU's peak bf16 TFLOP/s for MFU")
    p.add_argument("--threads", type=int, help="torch intra-op threads on the CPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - {"mmie", "unshared", "shared", "packed"}
    if unknown:
        p.error(f"unknown modes {sorted(unknown)}")
    if args.repeats < 1 or args.responses < 1:
        p.error("--repeats and --responses must be positive")
    source = source_state()
    require_clean(source, args.allow_dirty)
    chunk = args.chunk or auto_chunk(args.responses, args.workers)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from judge.core.rubric import load_rubric
    from judge.models.readout import Encoded, ExpectedScorer, _common_prefix_len, encode_prompts

    shape = SHAPES[args.shape]
    rubric = load_rubric("mmie")
    processor = build_processor(shape, args.max_tiles, rubric)
    config = build_config(shape, processor)
    counts = param_counts(config)
    desc = describe(shape, config, counts)
    print_description(desc)
    if args.describe:
        return 0

    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    peak, gpu = peak_tflops(device, args.peak_tflops)
    fm = flop_model(config, counts)

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    items = build_workload(
        processor,
        rubric,
        responses=args.responses,
        images=args.images,
        prompt_tokens=args.prompt_tokens,
        families=families,
        jitter=args.jitter,
        seed=args.seed,
    )
    requests = [request_for(it, rubric, "score") for it in items]
    # Encoding alone, timed on the CPU: what ExpectedScorer.encode does per request (no model needed).
    t0 = time.perf_counter()
    raw = [encode_prompts(processor, r.prompts, r.images, r.max_patches, key=r.key) for r in requests]
    encode_s = time.perf_counter() - t0
    encoded = [
        Encoded(r, ids, pv, _common_prefix_len(ids)) for r, (ids, pv) in zip(requests, raw, strict=True)
    ]
    lens = [len(x) for e in encoded for x in e.input_ids]
    prefix = [e.prefix_len for e in encoded]
    n_scores = len(lens)
    workload = {
        "responses": len(requests),
        "criterion_scores": n_scores,
        "families": families,
        "images_per_response": list(args.images),
        "images": sum(len(it.images) for it in items),
        "tiles": sum(int(e.pixel_values.shape[0]) for e in encoded if e.pixel_values is not None),
        "prompt_tokens_target": args.prompt_tokens,
        "jitter": args.jitter,
        "prompt_tokens_mean": statistics.fmean(lens),
        "prompt_tokens_min": min(lens),
        "prompt_tokens_max": max(lens),
        "shared_prefix_tokens_mean": statistics.fmean(prefix),
        "encode_seconds_inline": encode_s,
        "encode_responses_per_s": len(requests) / encode_s,
        "encode_threads": torch.get_num_threads(),
    }
    print(
        f"workload: {len(requests)} responses, {n_scores} criterion prompts of {workload['prompt_tokens_mean']:.0f} "
        f"tokens on average ({min(lens)}-{max(lens)}), shared prefix {workload['shared_prefix_tokens_mean']:.0f}; "
        f"{workload['images']} images; encoding alone {encode_s:.2f} s ({workload['encode_responses_per_s']:.1f} "
        "responses/s on one CPU process)"
    )

    # The encoding workers start now, from the processor, before the model exists and before any timing.
    encoder = Encoder(processor, requests, 0 if args.encode_only else args.workers, chunk)
    workers_start_s = encoder.start()
    model = scorer = packed_scorer = None
    build_s = weights_bytes = None
    if not args.encode_only:
        t0 = time.perf_counter()
        model = build_model(config, processor, device, dtype, args.attn, args.seed)
        sync(device)
        build_s = time.perf_counter() - t0
        weights_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        print(
            f"built on {device} ({dtype}, attention {args.attn}) in {build_s:.1f} s; "
            f"weights {weights_bytes / GIB:.2f} GiB"
        )
        scorer = ExpectedScorer(model, processor, rubric.scale.values, device=device, packed="off")
        # The packed path, asked for outright: a machine where it cannot run says why (ConfigError).
        packed_scorer = (
            ExpectedScorer(model, processor, rubric.scale.values, device=device, packed="flex")
            if "packed" in modes
            else None
        )
    else:
        modes = []

    attn_info = attn_used(model) if model is not None else None
    results: dict[str, dict] = {}
    scores: dict[str, dict] = {}
    kw = dict(batch_tokens=args.batch_tokens, batch_size=args.batch_size)
    #: mode -> (scorer, share_prefix) of modes (b) and (c)
    paths = {"unshared": (scorer, False), "shared": (scorer, True), "packed": (packed_scorer, True)}

    def run_mode(mode: str, enc: Encoder):
        sc, share = paths[mode]
        return score_judge(sc, enc, share_prefix=share, **kw)

    # Warm-up: first-call allocations, kernel selection, FlexAttention's compilation and lazy imports stay out
    # of the timings.
    warm = Encoder(processor, requests[: max(1, min(args.warmup, len(requests)))], 0, chunk)
    for mode in ("unshared", "shared", "packed"):
        if mode in modes:
            t0 = time.perf_counter()
            run_mode(mode, warm)
            print(f"  warm-up {mode}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    if "mmie" in modes:
        with eos_ignored(model):
            scorer.score_with_rationale(
                request_for(items[0], rubric, "rationale_score"), max_new_tokens=min(args.new_tokens, 8)
            )
    sync(device)

    labels = {
        "unshared": "b. judge-score, no prefix sharing",
        "shared": "c. judge-score, prefix sharing on KV-cache copies + token-budget batching",
        "packed": "c. judge-score, prefix sharing in one packed pass per row (FlexAttention prefix-tree mask)",
    }
    timed = [m for m in ("unshared", "shared", "packed") if m in modes]
    times: dict[str, list[float]] = {m: [] for m in timed}
    peaks: dict[str, list[dict]] = {m: [] for m in timed}
    counts_of = {
        m: workload_counts(
            encoded,
            fm,
            paths[m][1],
            args.batch_tokens,
            args.batch_size,
            chunk if args.workers > 0 else None,
            packed=m == "packed",
        )
        for m in timed
    }
    profiles: dict = {}
    profile_modes_wanted = [m.strip() for m in args.profile_modes.split(",") if m.strip() in timed]
    path: Path | None = None
    cmd = "python scripts/bench_score.py" + ("" if not argv else " " + shlex.join(argv))
    stopped: str | None = None

    def report(final: bool) -> Path:
        """The results so far: the table (and profile) printed, the JSON (one file) rewritten."""
        nonlocal path
        for mode in timed:
            if not times[mode]:
                continue
            sec = statistics.median(times[mode])
            c = counts_of[mode]
            results[mode] = {
                "label": labels[mode],
                "responses": len(requests),
                "criterion_scores": n_scores,
                "seconds": sec,
                "seconds_all": times[mode],
                "repeats_done": len(times[mode]),
                "responses_per_s": len(requests) / sec,
                "criterion_scores_per_s": n_scores / sec,
                "prefill_tokens": c["prefill_tokens"],
                "prefill_tokens_per_s": c["prefill_tokens"] / sec,
                "tokens_with_padding": c["tokens_with_padding"],
                "padding_fraction": c["padding_fraction"],
                "forward_batches": c["batches"],
                "tiles_encoded": c["tiles"],
                **rates(sec, c["flops"], peak),
                **max(peaks[mode], key=lambda m: m["peak_reserved_bytes"] or 0),
            }
        ratios = {}
        for c_mode, key in (("shared", "c_over"), ("packed", "packed_over")):
            if c_mode in results and "mmie" in results:
                ratios[f"{key}_a_responses_per_s"] = (
                    results[c_mode]["responses_per_s"] / results["mmie"]["responses_per_s"]
                )
            if c_mode in results and "unshared" in results:
                ratios[f"{key}_b_responses_per_s"] = (
                    results[c_mode]["responses_per_s"] / results["unshared"]["responses_per_s"]
                )
        if "packed" in results and "shared" in results:
            ratios["packed_over_shared_responses_per_s"] = (
                results["packed"]["responses_per_s"] / results["shared"]["responses_per_s"]
            )
        agree = {}
        for x, y in (("unshared", "shared"), ("unshared", "packed"), ("shared", "packed")):
            if x in scores and y in scores:
                agree[f"{x}_vs_{y}"] = agreement(scores[x], scores[y])
        if "shared" in scores and "mmie" in scores:
            agree["mmie_vs_shared"] = {
                **agreement(scores["mmie"], scores["shared"]),
                "note": "different prompts (rationale first) and a rationale before the score: "
                "not expected to agree",
            }
        done = min((len(times[m]) for m in timed), default=args.repeats)
        result = {
            "benchmark": "judge scoring throughput: MMIE-style vs judge-score without and with prefix sharing "
            "(KV copy, packed)",
            "command": cmd,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "device": machine_facts(device, peak, gpu),
            "versions": versions(),
            **source,
            "protocol": protocol(len(requests), done if timed else MIN_REPEATS, quiet=not final),
            "complete": final and stopped is None,
            "stopped": stopped,
            "config": {
                "model": desc,
                "dtype": str(dtype).replace("torch.", ""),
                "attn_implementation": args.attn,
                "attn_used": attn_info,
                "weights_gib": weights_bytes / GIB if weights_bytes else None,
                "build_seconds": build_s,
                "workload": workload,
                "new_tokens": args.new_tokens,
                "mmie_responses": args.mmie_responses,
                "batch_tokens": args.batch_tokens,
                "batch_size": args.batch_size,
                "workers": args.workers,
                "chunk": chunk if args.workers > 0 else None,
                "workers_start_seconds": workers_start_s,
                "warmup": args.warmup,
                "repeats": args.repeats,
                "budget_s": args.budget_s,
                "modes": modes,
                "seed": args.seed,
            },
            "flop_formula": {
                "lm_forward": "2*P_lm*n + 4*L*d_attn*(n*c + n*(n+1)/2) + 2*d_model*V*k  (n new tokens, c cached, "
                "k logit positions)",
                "vision_forward": "tiles*(2*P_vit*T + 4*L_vit*d_vit*T^2 + 2*P_proj*T_llm)",
                "P_lm": fm.lm_params,
                "L": fm.lm_layers,
                "d_attn": fm.attn_dim,
                "d_model_x_V": fm.head_params,
                "P_vit": fm.vit_params,
                "L_vit": fm.vit_layers,
                "d_vit": fm.vit_dim,
                "T": fm.vit_tokens,
                "P_proj": fm.proj_params,
                "T_llm": fm.tile_tokens,
                "notes": "real tokens only (no padding); each mode is charged the work its algorithm does (packed: "
                "the same as shared); MFU = flops / seconds / peak_bf16_tflops",
            },
            "results": results,
            "ratios": ratios,
            "agreement": agree,
            "profile": profiles or None,
        }
        print_table(result)
        if path is None:
            path = write_result(
                args.out, "bench_score_encode" if args.encode_only else "bench_score", device, result
            )
        else:
            from judge.core.atomic import write_json

            write_json(path, result)
        print(f"wrote {path}", flush=True)
        return path

    t_budget = time.perf_counter()

    def fits(mode: str) -> bool:
        if args.budget_s is None or not times[mode]:
            return True
        return time.perf_counter() - t_budget + times[mode][-1] <= args.budget_s

    for rep in range(args.repeats):
        # Alternate the order, so that a drift in the machine's state does not favour one mode.
        for mode in timed if rep % 2 == 0 else timed[::-1]:
            if not fits(mode):
                stopped = (
                    f"--budget-s {args.budget_s:g}: repeat {rep + 1} of {mode} (last {times[mode][-1]:.1f} s) would "
                    f"end past it, {time.perf_counter() - t_budget:.1f} s in"
                )
                break
            reset_peak(device)
            sync(device)
            t0 = time.perf_counter()
            out = run_mode(mode, encoder)
            sync(device)
            times[mode].append(time.perf_counter() - t0)
            peaks[mode].append(peak_memory(device))
            print(f"  {mode:8s} run {rep + 1}: {times[mode][-1]:.2f} s", file=sys.stderr, flush=True)
            assert sum(len(s) for _, s in out) == n_scores
            scores[mode] = _scores_by_key(out)
        if stopped:
            print(f"stopped: {stopped}", file=sys.stderr, flush=True)
            break
        if rep == 0 and args.profile and profile_modes_wanted:
            # Right after the first repeat, so that a run cut later still has it.
            profiles.update(
                profile_modes(
                    {m: functools.partial(run_mode, m, encoder) for m in profile_modes_wanted}, device
                )
            )
            print_profile(profiles)
        report(final=False)

    if "mmie" in modes and not stopped:
        sub = [request_for(it, rubric, "rationale_score") for it in items[: max(1, args.mmie_responses)]]
        reset_peak(device)
        sync(device)
        t0 = time.perf_counter()
        out, gen_lengths = score_mmie(scorer, sub, args.new_tokens)
        sync(device)
        sec = time.perf_counter() - t0
        mem = peak_memory(device)
        assert all(n == args.new_tokens for n in gen_lengths), gen_lengths
        c = mmie_counts(scorer, out, gen_lengths, fm)
        n = sum(len(s) for _, s in out)
        scores["mmie"] = _scores_by_key(out)
        results["mmie"] = {
            "label": f"a. MMIE-style: one (response, criterion) at a time, {args.new_tokens}-token rationale, "
            "then a read-out pass",
            "responses": len(sub),
            "criterion_scores": n,
            "seconds": sec,
            "responses_per_s": len(sub) / sec,
            "criterion_scores_per_s": n / sec,
            "prefill_tokens": c["prefill_tokens"],
            "prefill_tokens_per_s": c["prefill_tokens"] / sec,
            "decode_tokens": c["decode_tokens"],
            "generated_tokens": c["generated_tokens"],
            "generated_tokens_per_s": c["generated_tokens"] / sec,
            "tiles_encoded": c["tiles"],
            **rates(sec, c["flops"], peak),
            **mem,
        }

    report(final=True)
    del model
    reset_peak(device)
    return 0


def _fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_table(result: dict) -> None:
    rows = result["results"]
    dev = result["device"]
    print(
        f"\n{dev['name']} ({dev['type']}), {result['config']['dtype']}; peak {dev['peak_bf16_tflops'] or '-'} TFLOP/s"
    )
    head = [
        "mode",
        "responses",
        "seconds",
        "responses/s",
        "scores/s",
        "prefill tok/s",
        "TFLOP/s",
        "MFU",
        "peak alloc GiB",
        "peak reserved GiB",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for key in ("mmie", "unshared", "shared", "packed"):
        if key not in rows:
            continue
        r = rows[key]
        print(
            f"| {key} | {r['responses']} | {r['seconds']:.2f} | {r['responses_per_s']:.3g} | "
            f"{r['criterion_scores_per_s']:.3g} | {r['prefill_tokens_per_s']:.4g} | {_fmt(r['tflops_per_s'], '.3g')} | "
            f"{_fmt(r['mfu'], '.1%')} | {_fmt(r['peak_allocated_gib'], '.2f')} | {_fmt(r['peak_reserved_gib'], '.2f')} |"
        )
    for k, v in result["ratios"].items():
        print(f"{k}: {v:.2f}x")
    for k, v in result["agreement"].items():
        if v.get("max_abs_diff_expected") is not None:
            print(
                f"agreement {k}: max |diff| of expected score {v['max_abs_diff_expected']:.2e} over {v['pairs']}"
            )


if __name__ == "__main__":
    sys.exit(main())
