"""bench_score's timed modes: (a) MMIE-style generation with EOS ignored, (b) and (c) through
``ExpectedScorer.score`` with an :class:`Encoder` (inline or in DataLoader workers), the profiler run, the
work each mode does (tokens, tiles, FLOPs) and the agreement of their scores."""

from __future__ import annotations

import contextlib
import math
import statistics
import time

from _bench_common import fmt as _fmt
from _bench_common import sync
from _bench_model import FlopModel


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
            flops += fm.vision_input(e.pixel_values, e.vision_extra) + fm.lm(p, 0, 1)
            tokens += p
            for ids in e.input_ids:
                flops += fm.lm(len(ids) - p, p, 1)
                tokens += len(ids) - p
        else:
            for ids in e.input_ids:
                tiles += n_tiles
                flops += fm.vision_input(e.pixel_values, e.vision_extra) + fm.lm(len(ids), 0, 1)
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
            flops += fm.vision_input(enc.pixel_values, enc.vision_extra) + fm.lm(
                L, 0, 1
            )  # generation's prefill
            flops += sum(fm.lm(1, L + j, 1) for j in range(n_new - 1))  # decoding
            flops += fm.vision_input(enc.pixel_values, enc.vision_extra) + fm.lm(
                L + cont, 0, 1
            )  # the read-out pass
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
