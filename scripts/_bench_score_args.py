"""bench_score's command line (``scripts/bench_score.py``, whose docstring says what the modes measure): every option
and its default, in :func:`score_parser`."""

from __future__ import annotations

import argparse

from _bench_common import MIN_REPEATS, REPO, parse_range
from _bench_model import SHAPES


def score_parser(description: str) -> argparse.ArgumentParser:
    """bench_score's argument parser, ``description`` above its options."""
    from judge.models import BATCH_TOKENS

    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    return p
