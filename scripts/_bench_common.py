"""The harness the bench scripts share: argument types, the machine and the commit a figure comes from, the
protocol a published figure meets, GPU timing and memory helpers, latency percentiles, and the JSON file.

``bench_score.py`` still exposes the names it had before they moved here (``bs.NAME``); a script run from
anywhere finds this module because Python puts the script's folder first on its path.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Every bench script runs offline and without the tokenizers' own thread pool (children inherit both).
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


# ----------------------------------------------------------------------------- arguments
def parse_range(text: str) -> tuple[int, int]:
    """``"3"`` -> (3, 3); ``"2-3"`` -> (2, 3)."""
    lo, _, hi = str(text).partition("-")
    lo_i, hi_i = int(lo), int(hi or lo)
    if lo_i < 0 or hi_i < lo_i:
        raise argparse.ArgumentTypeError(f"bad range {text!r}")
    return lo_i, hi_i


def command_line(script: str, argv: list[str]) -> str:
    """How the run was started, as the JSON records it: ``python scripts/<script> <argv...>``."""
    return f"python scripts/{script}" + ("" if not argv else " " + shlex.join(argv))


def run_date() -> str:
    """The local date and time of a run, with its UTC offset (the JSON's ``date``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def fmt(x, spec: str) -> str:
    """``x`` formatted for a table, ``-`` when it is None."""
    return "-" if x is None else format(x, spec)


# ----------------------------------------------------------------------------- timing helpers
def print_table_head(columns: list[str]) -> None:
    """A Markdown table's header row and rule (the bench scripts' printed tables)."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")


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


def machine(device: str) -> dict:
    """:func:`machine_facts` of ``device`` without a peak rate (what a load test, which counts no FLOPs, records)."""
    import torch

    gpu = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else None
    return machine_facts(device, None, gpu)


def serving_versions() -> dict:
    """:func:`versions`, and the server's stack."""
    import importlib.metadata as md

    v = versions()
    for pkg in ("fastapi", "uvicorn", "httpx", "starlette", "pydantic"):
        try:
            v[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return v


def git_commit(repo: Path = REPO) -> str | None:
    """The commit of ``repo``, with ``-dirty`` when tracked files differ from it."""
    from judge.models.card import git_commit as _git_commit

    return _git_commit(repo)


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


# ----------------------------------------------------------------------------- latency percentiles
def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def latency_stats(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values) if values else None,
        "max": max(values) if values else None,
        "count": len(values),
    }
