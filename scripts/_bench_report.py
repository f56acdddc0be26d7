"""bench_score's report: the figures of a timed mode, the ratios between modes, the agreement of their
scores, the FLOP formula as the JSON records it, and the table printed after every repeat."""

from __future__ import annotations

import statistics

from _bench_common import fmt as _fmt
from _bench_common import print_table_head, rates
from _bench_model import FlopModel
from _bench_modes import agreement


def mode_result(
    label: str,
    responses: int,
    n_scores: int,
    times: list[float],
    counts: dict,
    peak: float | None,
    peaks: list[dict],
) -> dict:
    """A timed mode (b or c) over its repeats: the median seconds and the rates from it, the peak memory of its
    most memory-hungry repeat."""
    sec = statistics.median(times)
    c = counts
    return {
        "label": label,
        "responses": responses,
        "criterion_scores": n_scores,
        "seconds": sec,
        "seconds_all": times,
        "repeats_done": len(times),
        "responses_per_s": responses / sec,
        "criterion_scores_per_s": n_scores / sec,
        "prefill_tokens": c["prefill_tokens"],
        "prefill_tokens_per_s": c["prefill_tokens"] / sec,
        "tokens_with_padding": c["tokens_with_padding"],
        "padding_fraction": c["padding_fraction"],
        "forward_batches": c["batches"],
        "tiles_encoded": c["tiles"],
        **rates(sec, c["flops"], peak),
        **max(peaks, key=lambda m: m["peak_reserved_bytes"] or 0),
    }


def ratios_of(results: dict) -> dict:
    """How many times faster (c) and packed are than (a) and (b), in responses/s."""
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
    return ratios


def agreement_of(scores: dict) -> dict:
    """The agreement of the modes' scores, pair by pair ((a) beside (c) with a note: not expected to agree)."""
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
    return agree


def flop_formula(fm: FlopModel) -> dict:
    """The FLOP formula and its terms for this model, as the JSON records them."""
    if hasattr(fm, "vit_full_layers"):  # Qwen2.5-VL's windowed ViT (scripts/_bench_qwen.py)
        return {
            "lm_forward": "2*P_lm*n + 4*L*d_attn*(n*c + n*(n+1)/2) + 2*d_model*V*k  (n new tokens, c cached, "
            "k logit positions)",
            "vision_forward": "per image of N patches: 2*P_vit*N + 4*d_vit*(L_full*N^2 + (L_vit-L_full)*"
            "sum_windows n_w^2) + 2*P_proj*N/m^2",
            "P_lm": fm.lm_params,
            "L": fm.lm_layers,
            "d_attn": fm.attn_dim,
            "d_model_x_V": fm.head_params,
            "P_vit": fm.vit_params,
            "L_vit": fm.vit_layers,
            "L_full": fm.vit_full_layers,
            "d_vit": fm.vit_dim,
            "window_merged_tokens": fm.window_merged,
            "m": fm.merge,
            "P_proj": fm.proj_params,
            "notes": "real tokens only (no padding); each mode is charged the work its algorithm does (packed: "
            "the same as shared); MFU = flops / seconds / peak_bf16_tflops; 'tiles' count ViT patches",
        }
    return {
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
    }


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
    print_table_head(head)
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
