"""Tiny judge-benchmark fixtures in each benchmark's native format, with the judge verdicts the tests score.

Not a fixture module: the tests import it. Each ``write_*`` writes a data file (and tiny PNG images) into a
folder and returns ``(data_path, outputs)``: ``outputs`` are the per-item judge outputs in the format of
``judge-bench --judge-outputs`` (JSON objects, in the order the outputs file lists them). Every category of
each benchmark is present, and the cases its official code treats specially: unparsed / undecided verdicts,
items without a verdict, ids its grouping rules file unexpectedly, ties, rows its analysis drops.

The expected official numbers in the tests were computed by running each benchmark's own code (the commits
named in the tests) on these verdicts: a verdict of p_first_better > 0.5 given to the official code as a
choice of the first response, < 0.5 as the second, exactly 0.5 as the benchmark's unparsed / tie form, and
an item without a verdict left out of the official code's prediction file.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

MISSING = None  # an item the judge gave no verdict (left out of the outputs)


def _png(path: Path, shade: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (shade % 256, (shade * 7) % 256, (shade * 13) % 256)).save(path)


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


# ----------------------------------------------------------------------------- VL-RewardBench

#: (id, human_ranking, verdict): verdict is p_first_better, ("scores", a, b), or MISSING.
VLRB_ITEMS = [
    ("vlfeedback_0", [0, 1], 0.9),
    ("vlfeedback_1", [1, 0], 0.8),
    ("wildvision-battle_0", [1, 0], 0.2),
    ("wildvision", [0, 1], 0.7),  # no separator: the whole id is the prefix
    ("VLFeedback_2", [0, 1], 0.35),  # unknown prefix: filed under vlfeedback (general)
    ("povid_1", [0, 1], 0.3),  # "povid" is not a known prefix: general, not hallucination
    ("Mathverse_9", [0, 1], 0.6),  # case-sensitive prefix: general, not reasoning
    ("vlfeedback_3", [0, 1], 0.5),  # undecided: unparsed in the official code, dropped
    ("vlfeedback_4", [1, 0], MISSING),
    ("vlfeedback_5", [0, 1], ("scores", 4.0, 2.0)),
    ("RLAIF-V_0", [0, 1], 0.55),
    ("RLAIF-V_1", [1, 0], 0.45),
    ("RLAIF-V_2", [0, 1], 0.1),
    ("RLHF-V_0", [0, 1], 0.99),
    ("RLHF-V_1", [1, 0], 0.51),
    ("RLHF-V_2", [0, 1], ("scores", 3.0, 3.0)),  # equal scores: undecided
    ("hallucination_pair-0", [0, 1], 0.6),
    ("hallucination_pair-1", [1, 0], 0.5),
    ("hallucination_pair-2", [1, 0], MISSING),
    ("RLAIFV_3", [1, 0], 0.4),  # prefix "RLAIFV": general
    ("mathverse_0", [0, 1], 0.7),
    ("mathverse_1", [1, 0], 0.7),
    ("mmmu-pro_0", [0, 1], 0.4),
    ("mmmu_1", [1, 0], 0.3),
    ("mmmu-pro_2", [0, 1], 0.5),
    ("mathverse_2", [0, 1], MISSING),
    ("RLHF-V_3", [0, 1], 0.0),
    ("wildvision-battle_1", [1, 0], 1.0),
]


def _source_of(rid: str) -> str:
    for prefix, source in (
        ("RLAIF", "RLAIF-V"),
        ("RLHF", "RLHF-V"),
        ("hallucination", "POVID"),
        ("mathverse", "MathVerse"),
        ("mmmu", "MMMU-Pro"),
        ("wildvision", "WildVision"),
    ):
        if rid.startswith(prefix):
            return source
    return "VLFeedback"


def write_vlrb(folder: Path) -> tuple[Path, list[dict]]:
    """VL-RewardBench's rows as JSON Lines (``id, query, response, image_path, human_ranking, query_source``)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows, outputs = [], []
    for i, (rid, ranking, verdict) in enumerate(VLRB_ITEMS):
        image = f"images/vlrb_{i}.png"
        _png(folder / image, i)
        rows.append(
            {
                "id": rid,
                "query": f"What is shown in picture {i}?",
                "response": [f"Picture {i} shows a red square.", f"Picture {i} shows a blue circle."],
                "image_path": image,
                "human_ranking": ranking,
                "query_source": _source_of(rid),
                "models": ["model-x", "model-y"],
            }
        )
        if verdict is MISSING:
            continue
        if isinstance(verdict, tuple):
            outputs.append({"id": rid, "score_a": verdict[1], "score_b": verdict[2]})
        else:
            outputs.append({"id": rid, "p_first_better": verdict})
    path = folder / "vl_rewardbench.jsonl"
    _write_jsonl(path, rows)
    return path, outputs


def write_vlrb_parquet(folder: Path) -> tuple[Path, list[dict]]:
    """The same items as the hub's parquet: no image_path, the PNG's bytes in an ``image`` struct column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl, outputs = write_vlrb(folder / "jsonl")
    rows = [json.loads(x) for x in jsonl.read_text().splitlines()]
    for r in rows:
        r["image"] = {"bytes": (jsonl.parent / r.pop("image_path")).read_bytes(), "path": None}
    path = folder / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path, outputs


# ----------------------------------------------------------------------------- Multimodal RewardBench

#: (ID, Category, Better, verdict p_first_better or MISSING); the outputs list them in reverse order.
MMRB_ITEMS = [
    ("nocaps_1", "open_generation/correctness_task", "Output1", 0.8),
    ("nocaps_2", "open_generation/correctness_task", "Output2", 0.9),
    ("image2struct_16", "open_generation/correctness_task", "Output1", MISSING),
    ("visitbench_3", "open_generation/preference_task", "Output2", 0.2),
    ("visitbench_4", "open_generation/preference_task", "Output1", 0.5),
    ("visitbench_18", "open_generation/preference_task", "Output2", 0.5),
    ("mmmu-s_5", "knowledge", "Output1", 0.4),
    ("mmmu-v_6", "knowledge", "Output2", 0.5),
    ("mmmu-s_19", "knowledge", "Output2", 0.1),
    ("mathvista_7", "reasoning", "Output1", 0.7),
    ("mathvista_17", "reasoning", "Output2", 0.5),
    ("EMMA-Coding_8", "reasoning", "Output2", 0.6),
    ("emma-math_9", "reasoning", "Output1", 0.65),  # "math" not at the start: coding
    ("pairs_10", "safety", "Output1", 0.5),
    ("PAIRS_11", "safety", "Output2", 0.3),  # the prefix test is on the lower-cased ID
    ("hatefulmemes_12", "safety", "Output2", 0.6),
    ("RealworldQA_13", "vqa", "Output1", 0.55),
    ("MMBench_14", "vqa", "Output2", MISSING),
    ("SEED-Bench_15", "vqa", "Output2", 0.5),
    ("MMBench_20", "vqa", "Output1", 0.5),
]


def write_mmrb(folder: Path) -> tuple[Path, list[dict]]:
    """Multimodal RewardBench's ``all_data.json`` (a JSON list of ``ID, Text, Image, Output1, Output2,
    Better, Category``); images under ``images/<source>/``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows, outputs = [], []
    for i, (rid, cat, better, verdict) in enumerate(MMRB_ITEMS):
        source = rid.rsplit("_", 1)[0]
        image = f"images/{source}/{i}.png"
        _png(folder / image, 40 + i)
        rows.append(
            {
                "ID": rid,
                "Text": f"Question {i}: what does the image show?",
                "Image": image,
                "Output1": f"It shows thing {i}.",
                "Output2": f"It shows object {i}.",
                "Better": better,
                "Category": cat,
            }
        )
        if verdict is not MISSING:
            outputs.append({"id": rid, "p_first_better": verdict})
    path = folder / "all_data.json"
    path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return path, outputs[::-1]


# ----------------------------------------------------------------------------- MLLM-as-a-Judge

#: score mode: (score_id, id, original_dataset, human, prediction or MISSING)
MLLM_SCORE_ROWS = [
    (0, 100, "coco", 3, 2.4),
    (1, 100, "coco", "4", 3.9),
    (2, 100, "coco", 5, 4.2),
    (5, 101, "coco", 2, 2.6),
    (7, 101, "coco", "1", 1.2),
    (250, 140, "textVQA", 4, 3.1),  # its score_id is in coco's range: the analysis files it under coco
    (1800, 141, "textVQA", 2, 2.0),
    (1801, 141, "textVQA", 3, 3.2),
    (300, 200, "Concept Caption", 2, 3.0),
    (301, 200, "Concept Caption", 3, 3.5),
    (302, 200, "Concept Caption", 4, 2.9),
    (310, 201, "Concept Caption", 5, 4.8),
    (600, 300, "diffusiondb", 2, 2.5),
    (601, 300, "diffusiondb", 4, 3.5),
    (602, 301, "diffusiondb", 5, 4.5),
    (1200, 400, "mathvista", 1, 1.5),
    (1201, 400, "mathvista", 3, -1),  # -1: the paper's "no score" marker, kept by calculate_metrics
    (1202, 401, "mathvista", 4, 4.4),
    (1203, 401, "mathvista", 5, 3.3),
    (2100, 500, "WIT", 2, 2.2),
    (2101, 500, "WIT", 3, MISSING),
    (2102, 501, "WIT", 4, 3.7),
    (2103, 501, "WIT", 1, 2.5),
    (4000, 600, "LLaVA", 3, 3.3),  # score_id past the analysis' ranges: dropped there
    (4001, 600, "LLaVA", 4, 3.3),  # constant predictions: Pearson undefined (NaN)
    (4002, 601, "LLaVA", 2, 3.3),
]


def write_mllm_score(folder: Path) -> tuple[Path, list[dict]]:
    """MLLM-as-a-Judge's ``score.jsonl`` (``score_id, name, answer, id, instruction, image_path,
    original_dataset, human``); image paths relative to the file's parent folder, as in the release."""
    bench = folder / "Benchmark"
    bench.mkdir(parents=True, exist_ok=True)
    rows, outputs = [], []
    for sid, iid, ds, human, pred in MLLM_SCORE_ROWS:
        image = f"image/{iid}.png"
        _png(folder / image, iid)
        rows.append(
            {
                "score_id": sid,
                "name": ["llava", "gpt4", "cogvlm", "gemini"][sid % 4],
                "answer": f"Answer number {sid} about the picture.",
                "id": iid,
                "instruction": f"Please analyse this figure in detail: question {iid}?",
                "image_path": image,
                "original_dataset": ds,
                "human": human,
            }
        )
        if pred is not MISSING:
            outputs.append({"id": sid, "score": pred})
    path = bench / "score.jsonl"
    _write_jsonl(path, rows)
    return path, outputs


#: pair mode: (pair_id, id, original_dataset, human_answer, verdict p_first_better or MISSING)
MLLM_PAIR_ROWS = [
    (5, 0, "coco", "A", 0.8),
    (8, 1, "coco", "B", 0.7),
    (16, 2, "coco", "C", 0.5),  # a tie predicted and labelled
    (22, 3, "coco", "A", 0.5),  # a tie predicted, not labelled
    (29, 4, "coco", "B", 0.1),
    (30, 4, "coco", "C", 0.6),
    (300, 50, "Concept Caption", "A", 0.3),
    (301, 50, "Concept Caption", "A", 0.9),
    (302, 51, "Concept Caption", "B", 0.4),
    (303, 51, "Concept Caption", -1, 0.8),  # no human label: calculate_metrics counts it wrong
    (1200, 80, "mathvista", "B", 0.2),
    (1201, 80, "mathvista", "C", 0.1),
    (1202, 81, "mathvista", "A", MISSING),
    (1203, 81, "mathvista", "A", 0.65),
    (3000, 90, "LLaVA", "B", 0.5),
    (3001, 90, "LLaVA", "A", 0.55),
    (3002, 91, "LLaVA", "C", 0.45),
    (5000, 95, "WIT", "A", 0.75),  # pair_id past the analysis' ranges: dropped there
    (5001, 95, "WIT", "B", 0.85),
]


def write_mllm_pair(folder: Path) -> tuple[Path, list[dict]]:
    """MLLM-as-a-Judge's ``pair.jsonl`` (``id, pair_id, image_path, original_dataset, instruction,
    answer1, answer2, human_answer``)."""
    bench = folder / "Benchmark"
    bench.mkdir(parents=True, exist_ok=True)
    rows, outputs = [], []
    for pid, iid, ds, human, verdict in MLLM_PAIR_ROWS:
        image = f"image/{iid}.png"
        _png(folder / image, iid)
        rows.append(
            {
                "id": iid,
                "pair_id": pid,
                "image_path": image,
                "original_dataset": ds,
                "instruction": f"Please analyse this figure in detail: question {iid}?",
                "answer1": {"name": "gpt4", "answer": f"First answer of pair {pid}."},
                "answer2": {"name": "gemini", "answer": f"Second answer of pair {pid}."},
                "human_answer": human,
            }
        )
        if verdict is not MISSING:
            outputs.append({"id": pid, "p_first_better": verdict})
    path = bench / "pair.jsonl"
    _write_jsonl(path, rows)
    return path, outputs


#: batch mode: (id, original_dataset, number of answers, human_answer, predicted ranking or MISSING)
MLLM_BATCH_ROWS = [
    (200, "coco", 4, "CDAB", "CDAB"),
    (201, "coco", 4, "ACBD", "DBCA"),
    (202, "coco", 4, "CBAD", "CABD"),
    (300, "Concept Caption", 4, "BADC", "ABCD"),
    (301, "Concept Caption", 4, "DCBA", MISSING),
    (302, "Concept Caption", 3, "BCA", "CBA"),  # three answers
    (1200, "mathvista", 4, "ABCD", "BADC"),
    (1201, "mathvista", 4, "DABC", "DACB"),
]


def write_mllm_batch(folder: Path) -> tuple[Path, list[dict]]:
    """MLLM-as-a-Judge's ``batch.jsonl`` (``id, instruction, image_path, original_dataset, answers,
    human_answer``)."""
    bench = folder / "Benchmark"
    bench.mkdir(parents=True, exist_ok=True)
    rows, outputs = [], []
    for iid, ds, n, human, ranking in MLLM_BATCH_ROWS:
        image = f"image/{iid}.png"
        _png(folder / image, iid)
        rows.append(
            {
                "id": iid,
                "instruction": f"Please analyse this figure in detail: question {iid}?",
                "image_path": image,
                "original_dataset": ds,
                "answers": [
                    {"name": name, "answer": f"Answer {k} to question {iid}."}
                    for k, name in enumerate(["llava", "cogvlm", "gpt4", "gemini"][:n])
                ],
                "human_answer": human,
            }
        )
        if ranking is not MISSING:
            outputs.append({"id": iid, "ranking": ranking})
    path = bench / "batch.jsonl"
    _write_jsonl(path, rows)
    return path, outputs


WRITERS = {
    "vl-rewardbench": write_vlrb,
    "multimodal-rewardbench": write_mmrb,
    "mllm-judge-score": write_mllm_score,
    "mllm-judge-pair": write_mllm_pair,
    "mllm-judge-batch": write_mllm_batch,
}


def write_outputs(path: Path, outputs: list[dict]) -> Path:
    _write_jsonl(path, outputs)
    return path
