"""Per-family CPU timings, side by side in one run: one LoRA training step and scoring N responses, for each
family's tiny model (``tiny``: InternVL, ``tiny-qwen2.5-vl``: Qwen2.5-VL, ``tiny-qwen3-vl``: Qwen3-VL,
``tiny-llava-onevision``: LLaVA-OneVision, ``tiny-smolvlm``: SmolVLM, ``tiny-gemma3``: Gemma 3).

    python scripts/bench_families.py                       # 100 responses, 3 repeats, median
    python scripts/bench_families.py --responses 10 --repeats 1 --out /tmp/f.json
    python scripts/bench_families.py --models tiny-llava-onevision   # some families only

Scoring: N responses of the three task families (0-2 images of several sizes each, every criterion of its
family), through :class:`~judge.models.readout.ExpectedScorer` on the shared-prefix path (KV copy; the packed
path needs FlexAttention's compilation), as ``judge-score`` scores. Training step: LoRA on the language model
(the registry's pattern), a batch of examples with images (the judge prompt and its score target, loss on
the target), forward, backward and one AdamW step. Each figure is the median of ``--repeats`` runs after
one warm-up, the families timed in turns (every repeat times each of them once, so a load that comes and
goes falls on all alike); one intra-op thread. Prints a
table and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bench_common as common  # noqa: E402

FAMILIES = ("tiny", "tiny-qwen2.5-vl", "tiny-qwen3-vl", "tiny-llava-onevision", "tiny-smolvlm", "tiny-gemma3")


def requests(rubric, n: int):
    """``n`` responses of the three task families, 0-2 images each, every criterion of the family."""
    from PIL import Image

    from judge.core.template import build_judge_prompt
    from judge.models.readout import ScoreRequest

    rng = random.Random(0)
    out = []
    for i in range(n):
        family = ("SA", "PBL", "MSR")[i % 3]
        crits = rubric.families[family].criterion_ids
        images = [
            Image.new("RGB", (40 + 24 * j + 8 * (i % 7), 36 + 10 * j), (rng.randrange(256), 90, 30 * j))
            for j in range(i % 3)
        ]
        content = [{"type": "text", "text": "the answer " * (6 + 3 * (i % 5))}]
        content += [{"type": "image", "image": f"img{j}.png"} for j in range(len(images))]
        prompts = [
            build_judge_prompt(rubric, family, c, f"question {i}?", content, None, "score").messages
            for c in crits
        ]
        out.append(ScoreRequest(key=i, criteria=list(crits), prompts=prompts, images=images))
    return out


def train_batch(processor, rubric, batch: int):
    """A batch of judge prompts with their score targets (labels on the target only), one image each."""
    import torch

    from judge.models.families import of_processor

    reqs = [r for r in requests(rubric, 3 * batch) if r.images][:batch]
    texts = [
        processor.apply_chat_template(r.prompts[0], add_generation_prompt=True, tokenize=False) + "4"
        for r in reqs
    ]
    images: list = [img for r in reqs for img in r.images]
    family = of_processor(processor)
    # SmolVLM's and Gemma 3's processors take each prompt's images as a list of their own
    if family is not None and (family.image_axis or family.image_blocks):
        images = [list(r.images) for r in reqs]
    inputs = processor(text=texts, images=images, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = torch.full_like(inputs["input_ids"], -100)
    last = inputs["attention_mask"].sum(-1) - 1 if processor.tokenizer.padding_side == "right" else None
    for row in range(len(reqs)):
        col = int(last[row]) if last is not None else inputs["input_ids"].shape[1] - 1
        labels[row, col] = inputs["input_ids"][row, col]
    inputs["labels"] = labels
    return inputs


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def prepare(name: str, rubric, responses: int, batch: int) -> dict:
    """``name``'s tiny model ready to time: its scoring call and its LoRA training step (both warmed up once),
    and what the row reports about them."""
    import torch
    from peft import LoraConfig, get_peft_model

    from judge.models import build_tiny_scorer
    from judge.models.families import of_model
    from judge.models.readout import ExpectedScorer

    model, processor = build_tiny_scorer(seed=0, name=name)
    family = of_model(model)
    assert family is not None
    n_params = sum(p.numel() for p in model.parameters())  # the base's, before LoRA adds its own
    reqs = requests(rubric, responses)
    scorer = ExpectedScorer(model, processor, rubric.scale.values, packed="off")
    n_seqs = sum(len(r.criteria) for r in reqs)

    def score():
        for _ in scorer.score(reqs):
            pass

    score()  # warm-up

    # Training on a second copy: LoRA wraps the model it adapts, and scoring times the plain base.
    train_model, _ = build_tiny_scorer(seed=0, name=name)
    peft_model = get_peft_model(
        train_model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=family.lora_pattern())
    )
    peft_model.train()
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-4)
    inputs = train_batch(processor, rubric, batch)

    def step():
        loss = peft_model(**inputs).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up
    return {
        "score": score,
        "step": step,
        "row": {
            "model": name,
            "family": family.name,
            "parameters": n_params,
            "train_batch": batch,
            "train_tokens": int(inputs["attention_mask"].sum()),
            "responses": responses,
            "criterion_prompts": n_seqs,
        },
    }


def bench_all(names: list[str], rubric, responses: int, repeats: int, batch: int) -> list[dict]:
    """Time every family in turns: each repeat times every model's scoring and training step once, so a load
    that comes and goes on the machine falls on all of them alike (one after the other, the last families
    measured would carry what the first did not). The median of the repeats per model."""
    ready = [prepare(name, rubric, responses, batch) for name in names]
    score_t: list[list[float]] = [[] for _ in ready]
    step_t: list[list[float]] = [[] for _ in ready]
    for _ in range(repeats):
        for i, r in enumerate(ready):
            score_t[i].append(timed(r["score"]))
            step_t[i].append(timed(r["step"]))
    rows = []
    for r, sc, st in zip(ready, score_t, step_t, strict=True):
        score_s, step_s = statistics.median(sc), statistics.median(st)
        rows.append(
            {
                **r["row"],
                "train_step_s": step_s,
                "score_s": score_s,
                "responses_per_s": r["row"]["responses"] / score_s,
                "train_step_times_s": st,
                "score_times_s": sc,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--responses", type=int, default=100, help="responses scored per repeat (default 100)")
    ap.add_argument(
        "--repeats", type=int, default=3, help="timed repeats after one warm-up (median; default 3)"
    )
    ap.add_argument("--batch", type=int, default=4, help="examples in the training step's batch (default 4)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument(
        "--models",
        nargs="+",
        choices=FAMILIES,
        default=list(FAMILIES),
        help="the tiny models timed (default all)",
    )
    ap.add_argument("--out", type=Path, default=Path("bench_families.json"), help="the JSON written")
    args = ap.parse_args(argv)
    if min(args.responses, args.repeats, args.batch, args.threads) < 1:
        ap.error("--responses, --repeats, --batch and --threads must be positive")
    import torch

    from judge.core.rubric import load_rubric

    torch.set_num_threads(args.threads)
    rubric = load_rubric("mmie")
    rows = bench_all(list(args.models), rubric, args.responses, args.repeats, args.batch)
    print(f"CPU, {args.threads} thread(s), median of {args.repeats}")
    print(
        f"| model | family | params | train step (batch {args.batch}) s | score {args.responses} responses s |"
    )
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['model']} | {r['family']} | {r['parameters'] / 1e6:.2f}M | {r['train_step_s']:.3f} | "
            f"{r['score_s']:.2f} |"
        )
    out = {
        "command": common.command_line("bench_families.py", list(argv if argv is not None else sys.argv[1:])),
        "date": common.run_date(),
        "device": "cpu",
        "threads": args.threads,
        "repeats": args.repeats,
        "rows": rows,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
