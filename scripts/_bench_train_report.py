"""bench_train.py's report: one configuration's figures over its repeats, and the table it prints."""

from __future__ import annotations

import _bench_common as bc  # the harness's number formatting (scripts/ is on sys.path: bench_train puts it)


def median_result(runs: list[dict]) -> dict:
    """One configuration's figures over its repeats: the run of median time, with every run's seconds and
    the highest memory peaks of all."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    ok.sort(key=lambda r: r["seconds"])
    out = dict(ok[(len(ok) - 1) // 2])
    out["repeats_done"] = len(ok)
    out["seconds_all"] = [r["seconds"] for r in runs if "error" not in r]
    out["tokens_per_s_all"] = [r["tokens_per_s"] for r in runs if "error" not in r]
    for key in ("peak_allocated_gib", "peak_reserved_gib", "peak_allocated_bytes", "peak_reserved_bytes"):
        vals = [r.get(key) for r in ok if r.get(key) is not None]
        if vals:
            out[key] = max(vals)
    return out


def print_table(result: dict) -> None:
    dev = result["device"]
    print(
        f"\n{dev['name']} ({dev['type']}), {result['config']['dtype']}; peak {dev['peak_bf16_tflops'] or '-'} "
        f"TFLOP/s; batch {result['config']['batch_size']}, loss on {result['config']['loss_on']}"
    )
    head = [
        "config",
        "runs",
        "s/step",
        "tokens/s",
        "examples/s",
        "TFLOP/s",
        "MFU",
        "MFU (6N)",
        "peak alloc GiB",
        "peak reserved GiB",
        "loss",
    ]
    bc.print_table_head(head)
    f = bc.fmt
    for name, r in result["results"].items():
        if "error" in r:
            print(f"| {name} | {r['error']} |" + " |" * (len(head) - 2))
            continue
        print(
            f"| {name} | {r.get('repeats_done', 1)} | {r['seconds_per_step']:.3g} | {r['tokens_per_s']:.4g} | {r['examples_per_s']:.3g} | "
            f"{f(r['tflops_per_s'], '.3g')} | {f(r['mfu'], '.1%')} | {f(r['mfu_6n'], '.1%')} | "
            f"{f(r['peak_allocated_gib'], '.2f')} | {f(r['peak_reserved_gib'], '.2f')} | "
            f"{r['loss_first']:.3f} -> {r['loss_last']:.3f} |"
        )
