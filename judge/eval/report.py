"""``judge-report``: every scorer against the human scores, with the human ceiling, written as
``report.md``, ``report.json``, PNG plots and a self-contained ``report.html``.

The flow (:func:`run_report`, the one function the command calls):

1. load the human annotation files (``load_annotations`` with the rubric) into human items, one
   per (response, criterion), valued at the mean over annotators (:mod:`judge.eval.matching`);
2. optionally compute CLIPScore on the human file's responses (``clip_model``), written to
   ``clipscore.jsonl`` in the output folder and included as the scorer ``clipscore`` (and
   ``clipscore:refclipscore`` where references exist);
3. load every score file and match it onto the human items by (id, criterion), counting scored,
   unscorable, missing and unknown items;
4. compute, per slice (each criterion; each task family and each responding model on the overall
   score; all criteria pooled), the human ceiling and each scorer's statistics with cluster
   bootstrap intervals (questions resampled; :mod:`judge.eval.bootstrap`), and for every pair of
   scorers the paired bootstrap of the difference in correlation;
5. bias against humans on the overall score (:mod:`judge.eval.bias`): each scorer's partial
   correlation with response length given the human score, its offset per responding model, and
   its ranking of the models beside the humans' (Kendall tau-b), with intervals from the same
   question resamples as the main table;
6. write the files atomically.

The modules: :mod:`judge.eval.report_build` computes (the data of ``report.json``,
:mod:`judge.eval.report_data`); :mod:`judge.eval.report_agreement` and :mod:`judge.eval.report_bias`
render their sections into a :class:`~judge.eval.document.Doc`, which becomes ``report.md`` and
``report.html``; this module reads the inputs, draws the plots and writes the files.

The main table is the slice ``criterion = overall`` (every scorer, CLIPScore included, can be
compared there); without human overall scores it is all criteria pooled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from judge.core.atomic import atomic_write, write_json
from judge.core.errors import JudgeError
from judge.core.rubric import Rubric, load_rubric
from judge.core.schema import AnnotationRecord
from judge.eval.bias import bias_plot
from judge.eval.calibration_metrics import reliability_points
from judge.eval.config import ReportConfig, ScoreSpec
from judge.eval.document import Doc
from judge.eval.heldout import held_out_matches
from judge.eval.matching import HumanItem, Scorer, human_items, load_score_file, match_scorer, split_by_metric
from judge.eval.report_agreement import (
    PLOT_STAT,
    breakdown_sections,
    coverage_section,
    every_statistic_section,
    format_main_table,
    intro_section,
    main_section,
    main_table,
    paired_section,
    plots_section,
)
from judge.eval.report_bias import bias_section
from judge.eval.report_build import SMALL_N, Slice, build_report, make_slices, slice_test
from judge.eval.report_calibration import calibration_section, mmie_section, ppi_section, selective_section
from judge.eval.report_data import ClipSettings, ReportData

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- inputs


@dataclass
class ReportResult:
    """What :func:`run_report` produced: the report data (as in ``report.json``) and the files written."""

    data: ReportData
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def out_dir(self) -> Path:
        return self.files["json"].parent


def run_report(cfg: ReportConfig) -> ReportResult:
    """Load, match, compute and write the report ``cfg`` describes; see the module docstring. Raises
    :class:`JudgeError`. Progress lines (what was read, the CLIPScore run) are logged (INFO).
    """
    t0 = time.perf_counter()
    rub = load_rubric(cfg.rubric)
    if cfg.clip_model:
        from judge.models.devices import check_device

        check_device(cfg.device)
    specs = list(cfg.scores)
    for path in [*cfg.human, *(s.path for s in specs)]:
        if not Path(path).is_file():
            raise JudgeError(f"{path}: file not found")
    out = Path(cfg.out)
    records, items = _load_human_items(cfg, rub)
    if cfg.clip_model:
        specs.append(_run_clipscore(cfg, records, out))
    scorers = _match_scorers(cfg, specs, items, rub)
    data = build_report(
        records,
        items,
        scorers,
        rub,
        n_boot=cfg.bootstrap,
        seed=cfg.seed,
        title=cfg.title,
        note=cfg.note,
        human_files=[str(h) for h in cfg.human],
        criteria=cfg.criteria,
        ppi_fraction=cfg.ppi_fraction,
        ppi_draws=cfg.ppi_draws,
        min_labels=cfg.min_labels,
    )
    if cfg.clip_model:
        data.settings.clip = ClipSettings(model=cfg.clip_model, pairing=cfg.clip_pairing)
    data.elapsed_s = round(time.perf_counter() - t0, 2)
    written = write_report(data, scorers, items, rub, out)
    data.elapsed_s = round(time.perf_counter() - t0, 2)
    write_json(written["json"], data.to_json())  # again, with the final time
    return ReportResult(data, written)


def _load_human_items(cfg: ReportConfig, rub: Rubric) -> tuple[list[AnnotationRecord], list[HumanItem]]:
    """The human records and their (response, criterion) items, with ``criteria`` checked against them."""
    records = load_human(cfg.human, rub, root=cfg.root, check_images=bool(cfg.clip_model))
    if len(records) < 2:
        raise JudgeError(
            f"the human file(s) hold {len(records)} record(s); a report needs at least 2 human-scored "
            "responses (and 30 or more for intervals that mean something)"
        )
    items = human_items(records, cfg.criteria)
    if cfg.criteria:
        known = {c for r in records for s in r.scores.values() for c in s}
        unknown = [c for c in cfg.criteria if c not in known]
        if unknown:
            raise JudgeError(
                f"`criteria` {', '.join(unknown)}: no human scores for it; the human files have "
                f"{', '.join(sorted(known))}"
            )
    logger.info(
        f"human: {len(records)} responses, {len(items)} (response, criterion) items from {', '.join(map(str, cfg.human))}"
    )
    return records, items


def _run_clipscore(cfg: ReportConfig, records: list[AnnotationRecord], out: Path) -> ScoreSpec:
    """Score the human records' responses with CLIPScore into ``out/clipscore.jsonl``; its score spec."""
    from judge.core.io import write_jsonl
    from judge.eval.clipscore import clipscore_records

    assert cfg.clip_model is not None
    t1 = time.perf_counter()
    clip_recs = clipscore_records(
        records,
        cfg.clip_model,
        pairing=cfg.clip_pairing,
        device=cfg.device,
        batch_size=cfg.clip_batch_size,
    )
    clip_path = out / "clipscore.jsonl"
    write_jsonl(clip_path, clip_recs)
    logger.info(
        f"clipscore: {len(clip_recs)} records with {cfg.clip_model} ({cfg.clip_pairing} pairing) in "
        f"{time.perf_counter() - t1:.1f} s -> {clip_path}"
    )
    return ScoreSpec("clipscore", str(clip_path))


def _match_scorers(
    cfg: ReportConfig, specs: list[ScoreSpec], items: list[HumanItem], rub: Rubric
) -> list[Scorer]:
    """Every score file (split by metric) matched to the human items; refuses when nothing matches."""
    files = []
    for spec in specs:
        files.extend(split_by_metric(load_score_file(spec.path, spec.name)))
    unknown_forced = set(cfg.on_scale) - {f.name for f in files} - {s.name for s in specs}
    if unknown_forced:
        raise JudgeError(
            f"`on_scale` {', '.join(sorted(unknown_forced))}: no such scorer; scorers: "
            f"{', '.join(f.name for f in files)}"
        )
    scorers = [
        match_scorer(
            f,
            items,
            rub,
            criteria=cfg.criteria,
            force_on_scale=f.name in cfg.on_scale or f.name.split(":")[0] in cfg.on_scale,
        )
        for f in files
    ]
    if not any(s.scored for s in scorers):
        raise JudgeError(
            "no score record matches a human item: check that the score files score the responses of "
            f"the human file(s) ({', '.join(map(str, cfg.human))}): a label names its response by model and "
            "id, or by model and question_id; ids are compared exactly"
        )
    return scorers


def load_human(
    paths: Sequence[str | Path], rubric: Rubric, *, root: str | Path | None = None, check_images: bool = False
) -> list[AnnotationRecord]:
    """Annotation records of every human file, checked against the rubric; (model, id) must be unique across
    files.

    Each file resolves its images from ``root``, else its own folder (a ``judge-data build`` split file
    keeps its images beside it, under ``splits/images``).
    """
    from judge.core.identity import key_questions_by_id, load_labels_checked

    records: list[AnnotationRecord] = []
    first: dict[tuple[str, str], str] = {}  # (model, id) -> the file it came from
    for p in paths:
        recs = load_labels_checked(p, rubric=rubric, root=root, check_images=check_images)
        for r in recs:
            if (r.model, r.id) in first:
                raise JudgeError(
                    f"{p}: record id {r.id!r} of model {r.model!r} is also in {first[(r.model, r.id)]}; "
                    "human files must not overlap"
                )
            first[(r.model, r.id)] = str(p)
        records.extend(recs)
    key_questions_by_id(records)  # both label styles resample the same questions (judge.core.identity)
    return records


def build_document(data: ReportData, plots: dict[str, Path]) -> Doc:
    """The report's text: the same document becomes report.md and report.html."""
    d = Doc()
    intro_section(d, data)
    main_section(d, data)
    d.h(2, "Warnings")
    d.ul(data.warnings or ["none"])
    coverage_section(d, data)
    breakdown_sections(d, data, plots)
    every_statistic_section(d, data)
    paired_section(d, data)
    mmie_section(d, data)
    calibration_section(d, data, plots)
    selective_section(d, data)
    ppi_section(d, data)
    bias_section(d, data, plots)
    plots_section(d, data, plots)
    d.h(2, "Definitions")
    d.ul(data.definitions)
    return d


# ----------------------------------------------------------------------------- writing


def make_plots(
    data: ReportData, scorers: Sequence[Scorer], items: Sequence[HumanItem], rubric: Rubric, out: Path
) -> dict[str, Path]:
    """Write the PNGs; returns ``{kind: path}`` for those that had something to show."""
    from judge.eval import plots as P

    scale = (rubric.scale.min, rubric.scale.max)
    colours = P.scorer_colours([s.name for s in scorers])
    main = data.main_slice
    main_test = slice_test(main.kind, main.label)
    files: dict[str, Path] = {}
    panels = []
    for sc in scorers:
        ok = [(m.score, m.item) for m in sc.scored if main_test(m.item) and m.score is not None]
        if ok:
            panels.append(
                P.ScatterPanel(
                    sc.name,
                    [score for score, _ in ok],
                    [it.value for _, it in ok],
                    [it.task for _, it in ok],
                    sc.on_scale,
                    main.scorers[sc.name].stat(PLOT_STAT).value,
                )
            )
    if panels:
        files["scatter"] = P.scatter_plot(out / "scatter.png", panels, scale, main.title, colours)
    crit = data.slices_of("criterion")
    if len(crit) > 1:
        in_crit = [sc.name for sc in scorers if any(sc.name in s.scorers for s in crit)]
        series: dict[str, Sequence[dict | None]] = {
            n: [m.stat(PLOT_STAT).model_dump() if (m := s.scorers.get(n)) else None for s in crit]
            for n in in_crit
        }
        fams: dict[str, list[str]] = {}
        for it in items:
            fams.setdefault(it.criterion, [])
            if it.task not in fams[it.criterion]:
                fams[it.criterion].append(it.task)
        labels = [f"{s.label.replace('_', ' ')} ({', '.join(fams.get(s.label, []))})" for s in crit]
        files["criteria"] = P.criteria_plot(
            out / "criteria.png",
            labels,
            series,
            [s.ceiling.loao.stat(PLOT_STAT).model_dump() for s in crit],
            PLOT_STAT,
            colours,
        )
    on = [sc for sc in scorers if sc.on_scale and sc.scored]
    if on:
        pooled_label = "all criteria pooled" if len({it.criterion for it in items}) > 1 else main.title
        pairs: dict[str, tuple[Sequence[float], Sequence[float]]] = {sc.name: _scored_pairs(sc) for sc in on}
        files["confusion"] = P.confusion_plot(
            out / "confusion.png", [(name, *pairs[name]) for name in pairs], scale, pooled_label
        )
        files["calibration"] = P.calibration_plot(
            out / "calibration.png", pairs, scale, pooled_label, colours
        )
    reliability: dict[str, tuple[Sequence[float], Sequence[float]]] = {}
    for sc in scorers:
        held = held_out_matches(sc)[0]
        if len(held) >= 2:
            human = [m.item.value for m in held]
            reliability[f"{sc.name} raw"] = ([float(m.record.raw_score or 0.0) for m in held], human)
            reliability[f"{sc.name} calibrated"] = ([float(m.score or 0.0) for m in held], human)
    if reliability:
        files["reliability"] = P.calibration_plot(
            out / "reliability.png",
            reliability,
            scale,
            "held-out items, before and after calibration",
            P.scorer_colours(list(reliability)),
        )
    top: dict[str, list[tuple[float, float, int]]] = {}
    for sc in scorers:
        held = [m for m in held_out_matches(sc)[0] if m.record.raw_distribution and m.record.distribution]
        if len(held) >= 2:
            ratings = [[r for _, r in m.item.ratings] for m in held]
            vals = list(range(scale[0], scale[1] + 1))
            top[f"{sc.name} raw"] = reliability_points(
                [m.record.raw_distribution or [] for m in held], ratings, vals
            )
            top[f"{sc.name} calibrated"] = reliability_points(
                [m.record.distribution or [] for m in held], ratings, vals
            )
    if top:
        files["reliability_top"] = P.reliability_diagram(
            out / "reliability_top.png",
            top,
            "Top-label reliability on held-out items, before and after calibration",
        )
    if data.bias is not None and data.bias.scorers:
        bias_png = bias_plot(out / "bias.png", data.bias, colours)
        if bias_png is not None:
            files["bias"] = bias_png
    return files


def _scored_pairs(sc: Scorer) -> tuple[list[float], list[float]]:
    """A scorer's scores and the human values of the same items (every criterion)."""
    pairs = [(m.score, m.item.value) for m in sc.scored if m.score is not None]
    return [p for p, _ in pairs], [h for _, h in pairs]


def write_report(
    data: ReportData,
    scorers: Sequence[Scorer],
    items: Sequence[HumanItem],
    rubric: Rubric,
    out_dir: str | Path,
) -> dict[str, Path]:
    """Write the PNGs, ``report.json``, ``report.md`` and ``report.html`` (each atomically) into ``out_dir``;
    sets ``data.plots``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = make_plots(data, scorers, items, rubric, out)
    data.plots = {k: p.name for k, p in plots.items()}
    write_json(out / "report.json", data.to_json())
    doc = build_document(data, plots)
    with atomic_write(out / "report.md") as f:
        f.write(doc.markdown())
    with atomic_write(out / "report.html") as f:
        f.write(doc.html(data.title))
    return {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html", **plots}


__all__ = [
    "SMALL_N",
    "Doc",
    "ReportResult",
    "ScoreSpec",
    "Slice",
    "build_document",
    "build_report",
    "format_main_table",
    "load_human",
    "main_table",
    "make_plots",
    "make_slices",
    "run_report",
    "slice_test",
    "write_report",
]
