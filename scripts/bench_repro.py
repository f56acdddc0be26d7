"""How far an item's judge scores move with the way they are computed, against a float32 reference.

A randomly initialised judge of ``--shape`` (``tiny`` on the CPU; ``4b`` on a GPU, the shapes of
``scripts/bench_score.py``) is saved to a folder once, as a plain model that ``judge-score`` and
``judge-serve`` load with ``--rubric mmie``. A workload of responses of mixed lengths (prompt
lengths within +-``--jitter``, 0 to 3 images) is written as a prediction file with its images.
The first ``--targets`` responses are the items measured; the others only keep them company.

What runs by default is what the goals need, in one process and a few model loads (so that the 4B
shape on a GPU finishes in about two minutes): per ``--dtypes``, in the default mode, ``shared,
batched`` against ``unshared, batched`` (with ``--compare-readout`` also both with the model's own
read-out); in the reproducible mode, ``shared, batched`` against ``shared, alone`` (0 expected); and
the throughput of the two modes. ``--full`` adds every path below, the float32 reference and every
comparison. Each comparison is written to the JSON (one file, rewritten) as soon as both its sides are
scored, so a run cut short keeps what it compared.

For each ``--dtypes`` and each mode (``default``; ``reproducible``: ``--reproducible``), the
targets are scored along these paths (with ``--full``; the default runs the batched API paths and, in the
reproducible mode, ``shared, alone``):

* ``shared, alone`` / ``unshared, alone``: the API (``judge.Judge``), one item per call;
* ``shared, batched`` / ``unshared, batched``: the API, every item of the workload in one call
  (the targets packed with other items of other lengths and families);
* ``judge-score``: the command, on the whole file, in a process of its own;
* ``judge-serve``: a real server on loopback, the items sent in requests of 1 to 5 items, four
  requests in flight, so that its batcher mixes them;
* with ``--compare-readout`` (weights in bf16/fp16): ``shared, alone/batched, model read-out``, the
  score read from the model's own logits instead of the float32 read-out (what the default did
  before it read in float32).

The reference is float32, unshared, each item alone. Each comparison reports, per criterion and over
all, the p50, p99 and max of the absolute difference of the expected score (0-6 scale) and how many
scores are bit-identical. ``--repeats`` timed runs of the whole workload (shared, batched, in
process) give the reproducible mode's throughput against the default's (median). A table is printed
and the JSON goes beside the speed figures: ``benchmarks/results/bench_repro_<device>_<time>.json``.

    python scripts/bench_repro.py --full                              # CPU, tiny, float32 and bfloat16
    python scripts/bench_repro.py --shape 4b --device cuda --dtypes bfloat16 --compare-readout
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import _bench_common as bc  # noqa: E402  (the harness: protocol, machine facts, JSON)
import _load_serve as lt  # noqa: E402  (a judge-serve process on loopback, as load_test starts it)
import bench_score as bs  # noqa: E402  (model shapes, workload, build and protocol helpers)

REPO = bc.REPO
PATHS = (
    "shared, alone",
    "shared, batched",
    "unshared, alone",
    "unshared, batched",
    "judge-score",
    "judge-serve",
)
REFERENCE = "float32 reference"
#: the workload's images are up to 768x768 px: over judge-serve's default cap for the tiny judge's 56 px tiles
#: (4 x what its tiling uses); the server is told to take them, as the other paths do
MAX_PIXELS = 1_000_000
#: (path, against): what each comparison asks
COMPARISONS = [
    *((p, REFERENCE) for p in PATHS),
    ("shared, batched", "shared, alone"),
    ("unshared, alone", "shared, alone"),
    ("unshared, batched", "shared, batched"),
    ("judge-score", "shared, alone"),
    ("judge-serve", "judge-score"),
    ("shared, alone, model read-out", REFERENCE),
    ("shared, batched, model read-out", "shared, alone, model read-out"),
    ("shared, batched, model read-out", "unshared, batched, model read-out"),
]
#: what the default (not --full) compares: the goals' figures
QUICK = {
    ("unshared, batched", "shared, batched"),
    ("shared, batched, model read-out", "unshared, batched, model read-out"),
    ("shared, batched", "shared, alone"),
}


# ----------------------------------------------------------------------------- workload and judge
def write_workload(folder: Path, processor, rubric, args) -> tuple[list, list[dict]]:
    """The workload (``bench_score`` items, images in memory) and the same as prediction items, written with
    their images to ``folder/items.jsonl``."""
    items = bs.build_workload(
        processor,
        rubric,
        responses=args.responses,
        images=args.images,
        prompt_tokens=args.prompt_tokens,
        families=[f.strip() for f in args.families.split(",") if f.strip()],
        jitter=args.jitter,
        seed=args.seed,
    )
    return items, write_items(folder, items)


def write_items(folder: Path, items: list) -> list[dict]:
    """``bench_score`` workload items as a prediction file, ``folder/items.jsonl``, their images saved beside
    under the names their placeholders give (PNG: the pixels read back are the ones in memory)."""
    out = []
    for it in items:
        names = [seg["image"] for seg in it.question + it.response if seg.get("type") == "image"]
        for name, image in zip(names, it.images, strict=True):
            image.save(folder / name)
        rec = {"id": it.key, "benchmark": "mmie", "task": it.family, "question": it.question}
        rec["response"] = it.response
        if it.reference is not None:
            rec["reference"] = it.reference
        out.append(rec)
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return out


def save_judge(folder: Path, shape, processor, device: str, dtype, seed: int) -> None:
    """The random judge of ``shape``, saved as a plain model folder (weights in ``dtype``)."""
    config = bs.build_config(shape, processor)
    model = bs.build_model(config, processor, device, dtype, "sdpa", seed)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    del model
    bc.reset_peak(device)


def scores_of(records) -> dict[tuple[str, str], float | None]:
    return {(r.id, r.criterion): r.score for r in records}


# ----------------------------------------------------------------------------- the paths
def api_paths(judges: dict, data: Path, items: list[dict], targets: list[dict], dtype: str, reproducible: bool,
              compare_readout: bool, full: bool, emit) -> None:  # fmt: skip
    """The in-process paths (shared and unshared, each target alone and the whole workload at once), each
    handed to ``emit(name, scores)`` as soon as it is scored. ``judges(share)`` loads a judge (cached). The
    default (not ``full``) runs the batched paths, and ``shared, alone`` in the reproducible mode."""
    shares = (True, False) if full or not reproducible else (True,)
    for share in shares:
        name = "shared" if share else "unshared"
        j = judges(share)
        variants = [""]
        if compare_readout and not reproducible:
            if j.engine.scorer._head is None:
                print(f"  {dtype}: no float32 read-out to compare (float32 weights)", file=sys.stderr)
            else:
                variants.append(", model read-out")
        for suffix in variants:
            head = j.engine.scorer._head
            if suffix:
                j.engine.scorer._head = None  # the model's own logits, as before the float32 read-out
            try:
                emit(f"{name}, batched{suffix}", scores_of(j.score_records(items, root=data)))
                if full or (reproducible and share):
                    alone: dict = {}
                    for t in targets:
                        alone.update(scores_of(j.score_records([t], root=data)))
                    emit(f"{name}, alone{suffix}", alone)
            finally:
                j.engine.scorer._head = head


def run_judge_score(cmd_args: list[str], threads: int | None, log: Path) -> float:
    """``judge-score`` in a process of its own, its output in ``log``; its wall-clock seconds, start to exit."""
    cmd = [sys.executable, "-m", "judge.cli.score", *cmd_args]
    t0 = time.perf_counter()
    with log.open("w") as f:
        res = subprocess.run(cmd, cwd=REPO, env=lt.thread_env(threads), stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"judge-score failed ({res.returncode}); its output:\n{log.read_text()[-3000:]}")
    return seconds


def judge_scores(out: Path) -> dict[tuple[str, str], float | None]:
    """The judge's scores in ``out/scores.jsonl``, by (id, criterion)."""
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return {(r["id"], r["criterion"]): r["score"] for r in rows if r["metric"] == "judge"}


def cli_path(model_dir: Path, data: Path, dtype: str, device: str, reproducible: bool, threads: int | None,
             work: Path) -> dict:  # fmt: skip
    """``judge-score`` on the whole workload, in a process of its own."""
    out = work / f"score-{dtype}-{'repro' if reproducible else 'default'}"
    args = [str(data / "items.jsonl"), "--judge", str(model_dir), "--rubric", "mmie", "--dtype", dtype,
            "--device", device, "--out", str(out), "--overwrite", "--no-progress"]  # fmt: skip
    if reproducible:
        args.append("--reproducible")
    run_judge_score(args, threads, work / f"{out.name}.log")
    return judge_scores(out)


def serve_path(model_dir: Path, data: Path, items: list[dict], dtype: str, device: str, reproducible: bool,
               threads: int | None, work: Path, seed: int) -> dict:  # fmt: skip
    """A real ``judge-serve`` on loopback; the items in shuffled requests of 1-5, four in flight."""
    import httpx

    ns = argparse.Namespace(
        judge=str(model_dir), rubric="mmie", device=device, dtype=dtype, max_batch_tokens=16384, batch_size=16,
        max_wait_ms=20.0, max_queue=1024, max_padding=0.10, threads=threads, ready_timeout=600.0,
        server_args=["--image-root", str(data), "--max-items", "8", "--max-image-pixels", str(MAX_PIXELS)] + (["--reproducible"] if reproducible else []),
    )  # fmt: skip
    rng = random.Random(seed)
    order = items[:]
    rng.shuffle(order)
    bodies, i = [], 0
    while i < len(order):
        n = rng.randint(1, 5)
        bodies.append({"items": order[i : i + n]})
        i += n
    server = lt.start_server(ns, work / f"serve-{dtype}-{'repro' if reproducible else 'default'}.log")
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(lambda b: httpx.post(server.url + "/v1/score", json=b, timeout=3600), bodies)
            )
    finally:
        lt.stop_server(server)
    got = {}
    for r in answers:
        if r.status_code != 200:
            raise RuntimeError(f"judge-serve answered {r.status_code}: {r.text[:500]}")
        for res in r.json()["results"]:
            for crit, s in res["scores"].items():
                got[(res["id"], crit)] = s["score"]
    return got


# ----------------------------------------------------------------------------- statistics
def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default)."""
    import numpy as np

    return float(np.quantile(np.asarray(values, dtype=float), q))


def compare(a: dict, b: dict, keys: list[tuple[str, str]]) -> dict:
    """Per criterion and over all: p50, p99, max of |a - b| and the count of bit-identical scores."""
    by: dict[str, list[tuple[float, bool]]] = {}
    for k in keys:
        x, y = a.get(k), b.get(k)
        if x is None or y is None:
            continue
        by.setdefault(k[1], []).append((abs(x - y), x == y))
        by.setdefault("all", []).append((abs(x - y), x == y))
    out = {}
    for crit, pairs in sorted(by.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        d = [p[0] for p in pairs]
        out[crit] = {
            "n": len(d),
            "p50": quantile(d, 0.5),
            "p99": quantile(d, 0.99),
            "max": max(d),
            "identical": sum(p[1] for p in pairs),
        }
    return out


# ----------------------------------------------------------------------------- throughput
def throughput(judges: dict, data: Path, items: list[dict], dtype: str, device: str, repeats: int) -> dict:
    """Items/s of the whole workload (shared, one call), default and reproducible (``judges``: mode -> judge),
    alternating; median."""
    for j in judges.values():
        j.score_records(items[:2], root=data)  # warm-up
    times: dict[str, list[float]] = {m: [] for m in judges}
    for rep in range(repeats):
        for mode in list(judges) if rep % 2 == 0 else list(judges)[::-1]:
            bc.sync(device)
            t0 = time.perf_counter()
            judges[mode].score_records(items, root=data)
            bc.sync(device)
            times[mode].append(time.perf_counter() - t0)
            print(f"  {dtype} {mode:12s} run {rep + 1}: {times[mode][-1]:.2f} s", file=sys.stderr, flush=True)
    out = {
        m: {
            "seconds": statistics.median(t),
            "seconds_all": t,
            "items_per_s": len(items) / statistics.median(t),
        }
        for m, t in times.items()
    }
    out["reproducible_over_default"] = out["reproducible"]["items_per_s"] / out["default"]["items_per_s"]
    return out


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--shape", choices=sorted(bs.SHAPES), default="tiny")
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--dtypes", default="float32,bfloat16", help="weights' dtypes to measure (comma-separated)"
    )
    p.add_argument("--modes", default="default,reproducible", help="scoring modes: default, reproducible")
    p.add_argument(
        "--paths", default=",".join(["api", "cli", "serve"]), help="with --full: any of api, cli, serve"
    )
    p.add_argument("--responses", type=int, default=48, help="responses in the workload (default 48)")
    p.add_argument("--targets", type=int, default=24, help="the first N are measured (default 24)")
    p.add_argument("--images", type=bc.parse_range, default=(0, 3), help="images per response (default 0-3)")
    p.add_argument(
        "--prompt-tokens", type=int, default=600, help="mean criterion-prompt length (default 600)"
    )
    p.add_argument("--jitter", type=float, default=0.5, help="prompt lengths vary within +-this fraction")
    p.add_argument("--families", default="SA,PBL,MSR")
    p.add_argument("--repeats", type=int, default=bc.MIN_REPEATS, help="timed runs per mode (median)")
    p.add_argument("--compare-readout", action="store_true", help="also the model's own read-out (bf16/fp16)")
    p.add_argument(
        "--full",
        action="store_true",
        help="every path (each target alone, judge-score, judge-serve), the float32 reference and every "
        "comparison (default: the goals' comparisons, in process)",
    )
    p.add_argument(
        "--threads", type=int, help="torch threads here and in the judge-score/judge-serve processes"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-dir", help="where the random judge is saved (reused if it holds one)")
    p.add_argument("--allow-dirty", action="store_true", help="run on a tree that differs from its commit")
    p.add_argument("--criteria", action="store_true", help="print every criterion (the JSON always has them)")
    p.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = p.parse_args(argv)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    paths = {x.strip() for x in args.paths.split(",") if x.strip()} if args.full else {"api"}
    if (
        set(modes) - {"default", "reproducible"}
        or paths - {"api", "cli", "serve"}
        or not 0 < args.targets <= args.responses
    ):
        p.error("--modes: default, reproducible; --paths: api, cli, serve; 0 < --targets <= --responses")
    source = bc.source_state()
    bc.require_clean(source, args.allow_dirty)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from judge.core.rubric import load_rubric

    device = bc.resolve_device(args.device)
    shape = bs.SHAPES[args.shape]
    rubric = load_rubric("mmie")
    processor = bs.build_processor(shape, 1, rubric)
    work = Path(tempfile.mkdtemp(prefix="bench-repro-"))
    try:
        data = work / "data"
        data.mkdir()
        _, items = write_workload(data, processor, rubric, args)
        targets = items[: args.targets]
        model_dir = Path(args.model_dir) if args.model_dir else work / "judge"
        if not (model_dir / "config.json").is_file():
            save_dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
            t0 = time.perf_counter()
            save_judge(model_dir, shape, processor, device, save_dtype, args.seed)
            print(f"saved the random {shape.name} judge ({save_dtype}) in {time.perf_counter() - t0:.1f} s")
        keys = [(t["id"], c) for t in targets for c in rubric.family(t["task"]).criterion_ids]
        print(f"workload: {len(items)} responses, {len(targets)} measured ({len(keys)} scores)", flush=True)

        import judge

        peak, gpu = bc.peak_tflops(device, None)
        runs: dict[str, dict] = {}
        speed: dict[str, dict] = {}
        out_path: Path | None = None

        def write(final: bool = False) -> None:
            """The comparisons so far: the JSON (one file) rewritten; the table at the end."""
            nonlocal out_path
            result = {
                "benchmark": "reproducibility: an item's judge scores by path, batching and dtype, against a float32 "
                "reference; and the reproducible mode's throughput",
                "command": bc.command_line("bench_repro.py", argv),
                "date": bc.run_date(),
                "device": bc.machine_facts(device, peak, gpu),
                "versions": bc.versions(),
                **source,
                "protocol": bc.protocol(args.responses, args.repeats, quiet=not final),
                "complete": final,
                "config": {
                    "shape": shape.name,
                    "full": args.full,
                    "dtypes": dtypes,
                    "modes": modes,
                    "paths": sorted(paths),
                    "responses": args.responses,
                    "targets": args.targets,
                    "scores_measured": len(keys),
                    "images_per_response": list(args.images),
                    "prompt_tokens": args.prompt_tokens,
                    "jitter": args.jitter,
                    "reference": "float32 weights, unshared, each item alone",
                    "difference": "absolute difference of the expected score, 0-6 scale",
                    "repeats": args.repeats,
                    "threads": args.threads,
                    "seed": args.seed,
                },
                "runs": runs,
                "throughput": speed,
            }
            if final:
                print_table(result, args.criteria)
            if out_path is None:
                out_path = bc.write_result(args.out, "bench_repro", device, result)
            else:
                from judge.core.atomic import write_json

                write_json(out_path, result)
            if final:
                print(f"wrote {out_path}", flush=True)

        reference: dict = {}
        if args.full:
            ref_judge = judge.Judge.load(
                str(model_dir),
                rubric="mmie",
                device=device,
                dtype="float32",
                share_prefix=False,
                reproducible=True,
            )
            for t in targets:
                reference.update(scores_of(ref_judge.score_records([t], root=data)))
            del ref_judge
        wanted = [(a, b) for a, b in COMPARISONS if args.full or (a, b) in QUICK]

        loaded: dict[tuple[bool, bool], object] = {}  # the judges of one dtype
        for dtype in dtypes:

            def load(share: bool, repro: bool, dtype: str = dtype):
                if (share, repro) not in loaded:
                    loaded[(share, repro)] = judge.Judge.load(
                        str(model_dir),
                        rubric="mmie",
                        device=device,
                        dtype=dtype,
                        share_prefix=share,
                        reproducible=repro,
                    )
                return loaded[(share, repro)]

            for mode in modes:
                repro = mode == "reproducible"
                got: dict[str, dict] = {REFERENCE: reference} if reference else {}
                run = runs.setdefault(f"{dtype}/{mode}", {"comparisons": {}, "seconds": 0.0})
                t0 = time.perf_counter()

                def emit(name: str, scores: dict, got=got, run=run, t0=t0, dtype=dtype, mode=mode) -> None:
                    got[name] = scores
                    for a, b in wanted:
                        if a in got and b in got and f"{a} vs {b}" not in run["comparisons"]:
                            run["comparisons"][f"{a} vs {b}"] = compare(got[a], got[b], keys)
                            run["seconds"] = time.perf_counter() - t0
                            print(
                                f"  {dtype}/{mode}: {a} vs {b} ({run['seconds']:.1f} s)",
                                file=sys.stderr,
                                flush=True,
                            )
                            write()

                if "api" in paths:
                    api_paths(
                        lambda share, r=repro: load(share, r), data, items, targets, dtype, repro,
                        args.compare_readout, args.full, emit,
                    )  # fmt: skip
                if "cli" in paths:
                    emit("judge-score", cli_path(model_dir, data, dtype, device, repro, args.threads, work))
                if "serve" in paths:
                    emit(
                        "judge-serve",
                        serve_path(
                            model_dir, data, items, dtype, device, repro, args.threads, work, args.seed
                        ),
                    )
                run["seconds"] = time.perf_counter() - t0
                print(f"  {dtype}/{mode}: {len(run['comparisons'])} comparisons in {run['seconds']:.1f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
            if "api" in paths and set(modes) == {"default", "reproducible"} and args.repeats > 0:
                speed[dtype] = throughput(
                    {"default": load(True, False), "reproducible": load(True, True)},
                    data, items, dtype, device, args.repeats,
                )  # fmt: skip
                write()
            loaded.clear()
            bc.reset_peak(device)
        write(final=True)
    finally:
        if not args.model_dir:
            shutil.rmtree(work, ignore_errors=True)
        else:
            shutil.rmtree(work / "data", ignore_errors=True)
    return 0


def print_table(result: dict, criteria: bool = False) -> None:
    """Per run and comparison: the difference over all criteria and the criterion with the largest p99 (every
    criterion with ``criteria``; the JSON has them all)."""
    print(
        f"\n{result['device']['name']} ({result['device']['type']}); {result['config']['scores_measured']} scores"
    )
    for run, r in result["runs"].items():
        print(f"\n{run}: |difference| of the expected score (0-6)")
        print("| comparison | criterion | n | p50 | p99 | max | identical |")
        print("|---|---|---|---|---|---|---|")
        for comp, by in r["comparisons"].items():
            rows = [(c, s) for c, s in by.items() if c != "all"] if criteria else []
            if not criteria:
                worst = max((c for c in by if c != "all"), key=lambda c: (by[c]["p99"], by[c]["max"]))
                rows = [("all", by["all"]), (f"worst: {worst}", by[worst])]
            for crit, s in rows:
                print(f"| {comp} | {crit} | {s['n']} | {s['p50']:.2e} | {s['p99']:.2e} | {s['max']:.2e} | "
                      f"{s['identical']}/{s['n']} |")  # fmt: skip
    for dtype, t in result["throughput"].items():
        print(f"\nthroughput {dtype}: default {t['default']['items_per_s']:.2f} items/s, reproducible "
              f"{t['reproducible']['items_per_s']:.2f} items/s ({t['reproducible_over_default']:.0%} of the default; "
              f"median of {len(t['default']['seconds_all'])})")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
