"""Small samples of the three judge benchmarks, each in the benchmark's own format, for trying
``judge-bench`` without downloading a benchmark: ``examples/benchmarks/`` is what :func:`write_samples`
writes (a test checks it is, byte for byte).

The items are made here, not taken from the benchmarks: flat-colour pictures of shapes, a question about
them, and responses of which the "human" preference is the right one. They show the file formats and the
command; a judge's numbers on them say nothing about it.

* ``vl-rewardbench/test-00000-of-00001.parquet``: the hub's parquet (``id, query, response, image,
  human_ranking, query_source, models``; the picture's bytes in the ``image`` column), and
  ``vl-rewardbench/other_judge.jsonl``, another judge's verdicts for ``judge-bench --judge-outputs``;
* ``multimodal-rewardbench/all_data.json``: a JSON list (``ID, Text, Image, Output1, Output2, Better,
  Category``), pictures under ``images/``;
* ``mllm-as-a-judge/Benchmark/{score,pair,batch}.jsonl``, pictures under ``image/`` beside ``Benchmark/``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image, ImageDraw

__all__ = ["write_samples"]

COLOURS = {"red": (220, 40, 40), "blue": (40, 80, 220), "green": (40, 160, 60), "orange": (245, 140, 30)}
#: (colour, shape, count) of each picture
PICTURES = [
    ("red", "circle", 3),
    ("blue", "square", 2),
    ("green", "circle", 4),
    ("orange", "square", 1),
    ("red", "square", 5),
    ("blue", "circle", 2),
]
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six"]


def _picture(colour: str, shape: str, count: int) -> bytes:
    img = Image.new("RGB", (128, 96), (235, 240, 245))
    d = ImageDraw.Draw(img)
    step = 120 / count
    for k in range(count):
        cx, r = 4 + step * (k + 0.5), min(12, step / 2.6)
        box = [round(cx - r), round(48 - r), round(cx + r), round(48 + r)]
        (d.ellipse if shape == "circle" else d.rectangle)(box, fill=COLOURS[colour], outline=(30, 30, 30))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _answers(i: int) -> tuple[str, str, str]:
    """The question about picture ``i``, its right answer and a wrong one."""
    colour, shape, count = PICTURES[i]
    noun = shape if count == 1 else shape + "s"
    wrong = count + 1 if count < 5 else count - 2
    return (
        f"How many {colour} {shape}s are in the picture? Answer in one sentence.",
        f"The picture shows {NUMBERS[count]} {colour} {noun}.",
        f"The picture shows {NUMBERS[wrong]} {colour} {shape}s.",
    )


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _vl_rewardbench(out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sources = ["VLFeedback", "VLFeedback", "POVID", "RLAIF-V", "MathVerse", "WildVision"]
    prefixes = ["vlfeedback", "vlfeedback", "hallucination_pair", "RLAIF-V", "mathverse", "wildvision-battle"]
    rows, verdicts = [], []
    for i, (source, prefix) in enumerate(zip(sources, prefixes, strict=True)):
        question, right, wrong = _answers(i)
        first_right = i % 2 == 0
        rows.append(
            {
                "id": f"{prefix}_{i}",
                "query": question,
                "response": [right, wrong] if first_right else [wrong, right],
                "image": {"bytes": _picture(*PICTURES[i]), "path": None},
                "human_ranking": [0, 1] if first_right else [1, 0],
                "query_source": source,
                "models": ["model-x", "model-y"],
            }
        )
        # Another judge's verdict: right on all but the last item.
        p = 0.8 if first_right else 0.2
        verdicts.append({"id": f"{prefix}_{i}", "p_first_better": 1 - p if i == len(sources) - 1 else p})
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    _write(out / "test-00000-of-00001.parquet", buf.getvalue())
    _write(out / "other_judge.jsonl", _jsonl(verdicts))


def _multimodal_rewardbench(out: Path) -> None:
    ids = ["nocaps_1", "visitbench_2", "mmmu-s_3", "mathvista_4", "pairs_5", "RealworldQA_6"]
    cats = [
        "open_generation/correctness_task",
        "open_generation/preference_task",
        "knowledge",
        "reasoning",
        "safety",
        "vqa",
    ]
    rows = []
    for i, (rid, cat) in enumerate(zip(ids, cats, strict=True)):
        question, right, wrong = _answers(i)
        image = f"images/{rid.rsplit('_', 1)[0]}/{i}.png"
        _write(out / image, _picture(*PICTURES[i]))
        better = "Output1" if i % 2 == 0 else "Output2"
        first, second = (right, wrong) if better == "Output1" else (wrong, right)
        rows.append(
            {"ID": rid, "Text": question, "Image": image, "Output1": first, "Output2": second}
            | {"Better": better, "Category": cat}
        )
    _write(out / "all_data.json", (json.dumps(rows, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def _mllm_as_a_judge(out: Path) -> None:
    datasets = ["coco", "Concept Caption", "diffusiondb", "mathvista", "WIT", "coco"]
    for i in range(len(PICTURES)):
        _write(out / "image" / f"{i}.png", _picture(*PICTURES[i]))
    score, pair, batch = [], [], []
    for i, ds in enumerate(datasets):
        question, right, wrong = _answers(i)
        score += [
            {"score_id": 2 * i, "name": "gpt4", "answer": right, "id": i, "instruction": question}
            | {"image_path": f"image/{i}.png", "original_dataset": ds, "human": 5},
            {"score_id": 2 * i + 1, "name": "llava", "answer": wrong, "id": i, "instruction": question}
            | {"image_path": f"image/{i}.png", "original_dataset": ds, "human": 2},
        ]
        first_right = i % 2 == 0
        pair.append(
            {"id": i, "pair_id": i, "image_path": f"image/{i}.png", "original_dataset": ds}
            | {"instruction": question}
            | {
                "answer1": {"name": "gpt4", "answer": right if first_right else wrong},
                "answer2": {"name": "gemini", "answer": wrong if first_right else right},
                "human_answer": "A" if first_right else "B",
            }
        )
        answers = [right, wrong, "I cannot tell from the picture.", f"There are some {PICTURES[i][1]}s."]
        batch.append(
            {"id": i, "instruction": question, "image_path": f"image/{i}.png", "original_dataset": ds}
            | {
                "answers": [
                    {"name": name, "answer": a}
                    for name, a in zip(["gpt4", "llava", "cogvlm", "gemini"], answers, strict=True)
                ],
                "human_answer": "ADBC",
            }
        )
    _write(out / "Benchmark" / "score.jsonl", _jsonl(score))
    _write(out / "Benchmark" / "pair.jsonl", _jsonl(pair))
    _write(out / "Benchmark" / "batch.jsonl", _jsonl(batch))


def write_samples(out_dir: str | Path) -> Path:
    """Write the samples (see the module doc) into ``out_dir``; the same bytes every time."""
    out = Path(out_dir)
    _vl_rewardbench(out / "vl-rewardbench")
    _multimodal_rewardbench(out / "multimodal-rewardbench")
    _mllm_as_a_judge(out / "mllm-as-a-judge")
    return out
