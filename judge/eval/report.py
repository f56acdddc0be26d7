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

The main table is the slice ``criterion = overall`` (every scorer, CLIPScore included, can be
compared there); without human overall scores it is all criteria pooled.
"""

from __future__ import annotations

import base64
import html
import itertools
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from judge.core.atomic import atomic_write, write_json
from judge.core.errors import JudgeError
from judge.core.rubric import OVERALL, Rubric, load_rubric
from judge.core.schema import AnnotationRecord
from judge.eval.bias import MEASURE_LABELS, bias_plot, bias_warnings, build_bias
from judge.eval.bootstrap import STATS, ClusterBootstrap, bootstrap_correlations, paired_bootstrap, seeded_rng
from judge.eval.ceiling import human_ceiling
from judge.eval.config import ReportConfig, ScoreSpec
from judge.eval.matching import HumanItem, Scorer, human_items, load_score_file, match_scorer, split_by_metric
from judge.eval.report_data import (
    Ceiling,
    ClipSettings,
    Coverage,
    HumanSummary,
    Interval,
    PairedComparison,
    ReportData,
    ReportSettings,
    RubricInfo,
    ScorerBias,
    ScorerInfo,
    ScorerStats,
    SliceKind,
    SliceReport,
)
from judge.eval.stats import point_metrics

logger = logging.getLogger(__name__)

#: Below this many items (or questions) an interval is flagged as too rough to lean on.
SMALL_N = 30
STAT_LABELS = {"pearson": "Pearson", "spearman": "Spearman", "kendall": "Kendall τb"}
PLOT_STAT = "pearson"

DEFINITIONS = [
    "Human score of an item (response x criterion): the mean over its annotators. A score record with "
    "criterion null (one score per response, e.g. CLIPScore) is compared with the human overall score.",
    "Pearson, Spearman and Kendall tau-b: scipy.stats. Intervals: 95% percentile intervals of a cluster "
    "bootstrap that resamples questions with replacement (all responses to a question move together), "
    "{B} resamples, seed {seed}.",
    "MAE and MSE: scikit-learn, raw values. Quadratic-weighted kappa: scikit-learn, on scores rounded half up "
    "and clipped to the scale. Within 1: share of items with |scorer - human| <= 1. These four, the confusion "
    "matrix and the calibration plot only for scorers on the rubric scale.",
    "Pairwise ranking accuracy: pairs of responses to the same question (same criterion) that humans scored "
    "differently; the share the scorer orders the same way (a scorer tie counts half).",
    "Human ceiling: each annotator against the mean of the other annotators (leave one annotator out), "
    "averaged over annotators; Krippendorff's alpha (krippendorff package). Scorers are compared with the mean "
    "of all annotators, which is less noisy, so a scorer can exceed this ceiling.",
    "Paired comparison: the same question resamples for both scorers on the items both scored; the difference "
    "in correlation (A - B), its 95% percentile interval, and a two-sided p-value "
    "p = min(1, 2 (1 + min(#{{d* <= 0}}, #{{d* >= 0}})) / (1 + resamples)).",
    "Bias against humans (overall score, each scorer on the items it scored): response length = text tokens "
    "(matches of `\\w+` over the response's text parts) and number of images; partial Spearman of the scorer's "
    "score with length given the human score (rank-based partial correlation), flagged when its interval excludes "
    "0; per responding model the offset mean(scorer - human) and the offset relative to the median offset over "
    "models, flagged when that interval excludes 0 (rubric-scale scorers only); Kendall tau-b between the "
    "models ranked by mean scorer score and by mean human score.",
    f"† marks a value computed on fewer than {SMALL_N} items or questions: its interval is too wide, and too "
    "unstable, to mean much.",
]


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
        from judge.models.loading import check_device

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
            f"the human file(s) ({', '.join(map(str, cfg.human))}); ids are compared exactly"
        )
    return scorers


def load_human(
    paths: Sequence[str | Path], rubric: Rubric, *, root: str | Path | None = None, check_images: bool = False
) -> list[AnnotationRecord]:
    """Annotation records of every human file, checked against the rubric; ids must be unique across files.

    Each file resolves its images from ``root``, else its own folder (a ``judge-data build`` split file
    keeps its images beside it, under ``splits/images``).
    """
    from judge.core.io import load_annotations

    records: list[AnnotationRecord] = []
    first: dict[str, str] = {}  # record id -> the file it came from
    for p in paths:
        recs = load_annotations(p, rubric=rubric, root=root, check_images=check_images).records
        for r in recs:
            if r.id in first:
                raise JudgeError(
                    f"{p}: record id {r.id!r} is also in {first[r.id]}; human files must not overlap"
                )
            first[r.id] = str(p)
        records.extend(recs)
    return records


# ----------------------------------------------------------------------------- computation


def slice_test(kind: str, label: str) -> Callable[[HumanItem], bool]:
    """Which human items a slice holds: a criterion; a task family or a responding model on the overall
    score; or everything (``pooled``)."""
    if kind == "criterion":
        return lambda it: it.criterion == label
    if kind == "family":
        return lambda it: it.criterion == OVERALL and it.task == label
    if kind == "model":
        return lambda it: it.criterion == OVERALL and it.model == label
    if kind == "pooled":
        return lambda it: True
    raise ValueError(f"unknown slice kind {kind!r}")


@dataclass
class Slice:
    """Which human items a row of the report covers (see :func:`slice_test`)."""

    kind: SliceKind
    label: str

    @property
    def test(self) -> Callable[[HumanItem], bool]:
        return slice_test(self.kind, self.label)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.label}"

    @property
    def title(self) -> str:
        if self.kind == "criterion":
            return f"criterion {self.label}"
        if self.kind == "pooled":
            return "all criteria pooled"
        return f"{self.kind} {self.label}, overall score"


def make_slices(items: Sequence[HumanItem], rubric: Rubric) -> list[Slice]:
    """Main slice first (overall, else pooled), then each criterion, family, model, and all criteria pooled."""
    crits = list(dict.fromkeys(it.criterion for it in items))
    order = [OVERALL] + [c.id for f in rubric.families.values() for c in f.criteria]
    crits.sort(key=lambda c: order.index(c) if c in order else len(order))
    slices = [Slice("criterion", c) for c in crits]
    if OVERALL in crits:
        slices += [
            Slice("family", f) for f in dict.fromkeys(it.task for it in items if it.criterion == OVERALL)
        ]
        slices += [Slice("model", m) for m in sorted({it.model for it in items if it.criterion == OVERALL})]
    if len(crits) > 1:
        slices.append(Slice("pooled", "all criteria"))
    if OVERALL not in crits and len(crits) > 1:
        slices.insert(0, slices.pop())  # no human overall: the pooled slice is the main one
    return slices


def scorer_slice_metrics(
    sc: Scorer, sl: Slice, plan: ClusterBootstrap, scale: tuple[int, int], slice_items: Sequence[HumanItem]
) -> ScorerStats | None:
    """One scorer's statistics on one slice, with intervals; ``None`` if it has no item there.

    ``n_expected`` counts the slice's human items of the criteria and families the scorer scores, so
    ``n / n_expected`` is its coverage on the slice.
    """
    test = sl.test
    in_slice = [m for m in sc.matches if test(m.item)]
    if not in_slice:
        return None
    crits, fams = set(sc.coverage["criteria_scored"]), set(sc.coverage["families_scored"])
    n_expected = sum(1 for it in slice_items if it.criterion in crits and it.task in fams)
    ok = [m for m in in_slice if m.score is not None]
    pred = [m.score for m in in_slice if m.score is not None]
    hum = [m.item.value for m in ok]
    clusters = [m.item.question_id for m in ok]
    pm = point_metrics(
        pred, hum, [(m.item.question_id, m.item.criterion) for m in ok], scale=scale if sc.on_scale else None
    )
    corr = (
        bootstrap_correlations(pred, hum, clusters, plan, point=pm)
        if ok
        else {s: {"value": None, "ci": None, "n_valid": 0} for s in STATS}
    )
    n_q = len(set(clusters))
    return ScorerStats.model_validate(
        {
            "n": len(ok),
            "n_expected": n_expected,
            "n_unscorable": len(in_slice) - len(ok),
            "n_missing": n_expected - len(in_slice),
            "n_questions": n_q,
            **corr,
            **{k: pm[k] for k in ("mae", "mse", "qwk", "within1", "pairwise")},
            "small_n": len(ok) < SMALL_N or n_q < SMALL_N,
        }
    )


def build_report(
    records: Sequence[AnnotationRecord],
    items: Sequence[HumanItem],
    scorers: Sequence[Scorer],
    rubric: Rubric,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    title: str = "Judge agreement with human scores",
    note: str | None = None,
    human_files: Sequence[str] = (),
    criteria: Sequence[str] | None = None,
) -> ReportData:
    """Everything numeric of a report, as ``report.json`` holds it (see the module docstring)."""
    slices, plans = _slice_reports(items, scorers, rubric, n_boot, seed)
    bias = build_bias(records, items, scorers, n_boot=n_boot, seed=seed, small_n=SMALL_N)
    return ReportData(
        title=title,
        note=note,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        rubric=RubricInfo(name=rubric.name, hash=rubric.hash, scale=[rubric.scale.min, rubric.scale.max]),
        human=_human_summary(records, items, human_files),
        settings=ReportSettings(
            bootstrap=n_boot,
            seed=seed,
            interval="95% percentile, questions resampled",
            criteria=list(criteria) if criteria else None,
            small_n=SMALL_N,
        ),
        scorers=[_scorer_info(s) for s in scorers],
        main=slices[0].key,
        slices=slices,
        paired=_paired_comparisons(slices, scorers, plans),
        bias=bias,
        warnings=[*_report_warnings(slices, scorers, n_boot), *bias_warnings(bias)],
        definitions=[d.format(B=n_boot, seed=seed) for d in DEFINITIONS],
    )


def _slice_reports(
    items: Sequence[HumanItem], scorers: Sequence[Scorer], rubric: Rubric, n_boot: int, seed: int
) -> tuple[list[SliceReport], dict[str, ClusterBootstrap]]:
    """Every slice (the main one first) with its human ceiling and scorers, and each slice's resampling
    plan (the paired comparisons reuse it)."""
    scale = (rubric.scale.min, rubric.scale.max)
    out: list[SliceReport] = []
    plans: dict[str, ClusterBootstrap] = {}
    for sl in make_slices(items, rubric):
        test = sl.test
        hs = [it for it in items if test(it)]
        plan = plans[sl.key] = ClusterBootstrap(
            [it.question_id for it in hs], n_boot, seeded_rng(seed, sl.key)
        )
        stats = {}
        for sc in scorers:
            m = scorer_slice_metrics(sc, sl, plan, scale, hs)
            if m is not None:
                stats[sc.name] = m
        out.append(
            SliceReport(
                key=sl.key,
                kind=sl.kind,
                label=sl.label,
                title=sl.title,
                n_items=len(hs),
                n_questions=plan.n_clusters,
                ceiling=Ceiling.model_validate(human_ceiling(hs, plan, rubric.scale.values)),
                scorers=stats,
            )
        )
    return out, plans


def _paired_comparisons(
    slices: Sequence[SliceReport], scorers: Sequence[Scorer], plans: dict[str, ClusterBootstrap]
) -> list[PairedComparison]:
    """Every pair of scorers on the main slice and on all criteria pooled."""
    main = slices[0]
    paired = []
    compared = [s for s in slices if s.key in (main.key, "pooled:all criteria")]
    for entry, (a, b) in itertools.product(compared, itertools.combinations(scorers, 2)):
        res = _paired(entry, a, b, plans[entry.key])
        if res is not None:
            paired.append(res)
    # The pooled comparison of a pair that only shares overall items repeats the main one: keep one.
    seen = {(p.a, p.b, p.n) for p in paired if p.slice == main.key}
    return [p for p in paired if p.slice == main.key or (p.a, p.b, p.n) not in seen]


def _paired(entry: SliceReport, a: Scorer, b: Scorer, plan: ClusterBootstrap) -> PairedComparison | None:
    test = Slice(entry.kind, entry.label).test
    sa = {m.item.key: m for m in a.scored if test(m.item)}
    sb = {m.item.key: m for m in b.scored if test(m.item)}
    common = [k for k in sa if k in sb]
    if len(common) < 2:
        return None
    res = paired_bootstrap(
        # Matches of ``scored`` all have a score; the filter only tells the type checker so.
        [s for k in common if (s := sa[k].score) is not None],
        [s for k in common if (s := sb[k].score) is not None],
        [sa[k].item.value for k in common],
        [sa[k].item.question_id for k in common],
        plan,
    )
    n_q = len({sa[k].item.question_id for k in common})
    return PairedComparison.model_validate(
        {
            "slice": entry.key,
            "a": a.name,
            "b": b.name,
            "n": len(common),
            "n_questions": n_q,
            "small_n": len(common) < SMALL_N or n_q < SMALL_N,
            **res,
        }
    )


def _report_warnings(slices: Sequence[SliceReport], scorers: Sequence[Scorer], n_boot: int) -> list[str]:
    """What a reader must know before trusting the numbers: each scorer's own warnings, then small samples,
    a missing human ceiling, few resamples and scorers off the rubric scale."""
    main = slices[0]
    warnings: list[str] = []
    small_main = []
    for sc in scorers:
        warnings.extend(f"{sc.name}: {w}" for w in sc.warnings)
        m = main.scorers.get(sc.name)
        if m and m.small_n and m.n >= 2:
            small_main.append(f"{sc.name} (n = {m.n} items from {m.n_questions} questions)")
    if small_main:
        warnings.append(
            f"fewer than {SMALL_N} items or questions in the main table for {', '.join(small_main)}: "
            "these intervals are too wide and unstable to mean much; score more items (more questions "
            "above all: questions are what the bootstrap resamples)"
        )
    if main.ceiling.n_items_multi == 0:
        warnings.append(
            "every human item has a single annotator: the human ceiling (agreement between "
            "annotators) is undefined; have several annotators score at least part of the set"
        )
    n_small = sum(1 for s in slices for m in s.scorers.values() if m.small_n)
    if n_small:
        warnings.append(
            f"{n_small} value(s) in the breakdowns rest on fewer than {SMALL_N} items or questions (marked †)"
        )
    if n_boot < 200:
        warnings.append(
            f"only {n_boot} bootstrap resamples: the interval ends are themselves imprecise; "
            "use --bootstrap 1000 or more"
        )
    off = [s.name for s in scorers if not s.on_scale]
    if off:
        warnings.append(
            f"not on the rubric scale, so without MAE, MSE, kappa, within 1, confusion matrix and "
            f"calibration: {', '.join(off)}"
        )
    return warnings


def _human_summary(
    records: Sequence[AnnotationRecord], items: Sequence[HumanItem], human_files: Sequence[str]
) -> HumanSummary:
    return HumanSummary(
        files=list(human_files),
        responses=len(records),
        questions=len({r.question_id for r in records}),
        items=len(items),
        annotators=sorted({a for it in items for a, _ in it.ratings}),
        criteria=list(dict.fromkeys(it.criterion for it in items)),
        families=dict(Counter(r.task for r in records)),
        models=dict(Counter(r.model for r in records)),
        mean_annotators_per_item=(sum(len(it.ratings) for it in items) / len(items)) if items else None,
    )


def _scorer_info(s: Scorer) -> ScorerInfo:
    return ScorerInfo(
        name=s.name,
        file=s.path,
        metric=s.metric,
        on_scale=s.on_scale,
        scale_note=s.scale_reason,
        coverage=Coverage.model_validate(s.coverage),
        warnings=s.warnings,
        producer=s.matches[0].record.producer if s.matches else None,
    )


# ----------------------------------------------------------------------------- documents


def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}f}"


def _fmt_ci(stat: Interval | None, small: bool = False, digits: int = 2) -> str:
    if stat is None or stat.value is None:
        return "undefined"
    out = f"{stat.value:.{digits + 1}f}"
    if stat.ci:
        out += f" [{stat.ci[0]:.{digits}f}, {stat.ci[1]:.{digits}f}]"
    return out + (" †" if small else "")


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


class Doc:
    """A list of blocks rendered to Markdown and to self-contained HTML (images embedded)."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def note(self, text: str):
        self.blocks.append(("note", text))

    def ul(self, items: Sequence[str]):
        if items:
            self.blocks.append(("ul", list(items)))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]):
        self.blocks.append(("table", list(header), [list(r) for r in rows]))

    def img(self, path: Path, alt: str):
        self.blocks.append(("img", path, alt))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append(f"{'#' * b[1]} {b[2]}")
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "note":
                out.append(f"> **{b[1]}**")
            elif b[0] == "ul":
                out.append("\n".join(f"- {x}" for x in b[1]))
            elif b[0] == "table":
                esc = [[c.replace("|", "\\|") for c in row] for row in [b[1], *b[2]]]
                lines = ["| " + " | ".join(esc[0]) + " |", "|" + "|".join(" --- " for _ in esc[0]) + "|"]
                lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
                out.append("\n".join(lines))
            elif b[0] == "img":
                out.append(f"![{b[2]}]({b[1].name})")
        return "\n\n".join(out) + "\n"

    def html(self, title: str) -> str:
        e = html.escape
        body = []
        for b in self.blocks:
            if b[0] == "h":
                body.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                body.append(f"<p>{_inline(b[1])}</p>")
            elif b[0] == "note":
                body.append(f'<p class="note">{_inline(b[1])}</p>')
            elif b[0] == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in b[1]) + "</ul>")
            elif b[0] == "table":
                head = "".join(f"<th>{e(c)}</th>" for c in b[1])
                rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in b[2])
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif b[0] == "img":
                data = base64.b64encode(Path(b[1]).read_bytes()).decode("ascii")
                body.append(
                    f'<figure><img alt="{e(b[2])}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{e(b[2])}</figcaption></figure>"
                )
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
        )


_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;"
    "color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;font-size:.88em}"
    "th,td{border:1px solid #ccc;padding:.3em .55em;text-align:left;vertical-align:top}th{background:#f1f3f5}"
    "tr:nth-child(even) td{background:#fafafa}code{background:#f1f3f5;padding:0 .2em;border-radius:3px}"
    ".note{background:#fff8e1;border-left:4px solid #f0b400;padding:.6em 1em}"
    "figure{margin:1.5em 0}img{max-width:100%;border:1px solid #eee}figcaption{color:#666;font-size:.85em}"
)


def _inline(text: str) -> str:
    """Escape text for HTML, keeping Markdown's `code` and **bold**."""
    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)


def _coverage_cell(scored: int, expected: int) -> str:
    if not expected:
        return "0 items"
    return f"{scored}/{expected} ({_pct(scored / expected)})"


def main_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table (the main slice): humans first, then every scorer."""
    main = data.main_slice
    header = [
        "scorer",
        "n",
        "coverage",
        *(f"{STAT_LABELS[s]} [95% CI]" for s in STATS),
        "MAE",
        "QWK",
        "within 1",
        "pairwise acc.",
    ]
    ceil = main.ceiling
    small_h = main.n_items < SMALL_N or main.n_questions < SMALL_N
    rows = [
        [
            "humans (leave one annotator out)",
            str(ceil.n_items_multi),
            "–",
            *(_fmt_ci(ceil.loao.stat(s), small_h) for s in STATS),
            "–",
            "–",
            "–",
            "–",
        ]
    ]
    for sc in data.scorers:
        m = main.scorers.get(sc.name)
        if m is None:
            rows.append([sc.name, "0", "0 items", "no item", "", "", "", "", "", ""])
            continue
        pw = m.pairwise
        rows.append(
            [
                sc.name,
                str(m.n),
                _coverage_cell(m.n, m.n_expected),
                *(_fmt_ci(m.stat(s), m.small_n) for s in STATS),
                _fmt(m.mae),
                _fmt(m.qwk),
                _pct(m.within1),
                f"{_pct(pw.accuracy)} of {pw.n_pairs}" if pw.accuracy is not None else "–",
            ]
        )
    return header, rows


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned as plain text, a rule under the header (what a command prints)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_main_table(data: ReportData) -> str:
    """The main table as aligned plain text (what the command prints)."""
    return text_table(*main_table(data))


def build_document(data: ReportData, plots: dict[str, Path]) -> Doc:
    """The report's text: the same document becomes report.md and report.html."""
    d = Doc()
    _intro(d, data)
    _main_section(d, data)
    d.h(2, "Warnings")
    d.ul(data.warnings or ["none"])
    _coverage_section(d, data)
    _breakdown_sections(d, data, plots)
    _every_statistic_section(d, data)
    _paired_section(d, data)
    _bias_section(d, data, plots)
    _plots_section(d, data, plots)
    d.h(2, "Definitions")
    d.ul(data.definitions)
    return d


def _intro(d: Doc, data: ReportData) -> None:
    """Title, note, and what was compared: the human set, the rubric, the resampling."""
    d.h(1, data.title)
    if data.note:
        d.note(data.note)
    hu, rub, st = data.human, data.rubric, data.settings
    d.p(
        f"Human scores: {hu.responses} responses to {hu.questions} questions, {hu.items} (response, "
        f"criterion) items, annotators {', '.join(hu.annotators)} (mean {_fmt(hu.mean_annotators_per_item, 1)} "
        f"per item), from {', '.join(f'`{f}`' for f in hu.files)}. Rubric `{rub.name}` (hash "
        f"`{rub.hash[:12]}`), scale {rub.scale[0]}..{rub.scale[1]}. Intervals: {st.bootstrap} "
        f"bootstrap resamples of questions, seed {st.seed}. Generated {data.created}"
        + (f" in {data.elapsed_s:.1f} s." if data.elapsed_s is not None else ".")
    )


def _main_section(d: Doc, data: ReportData) -> None:
    main = data.main_slice
    d.h(2, f"Main table: agreement with humans ({main.title})")
    header, rows = main_table(data)
    d.table(header, rows)
    ceil = main.ceiling
    d.p(
        f"Krippendorff's alpha of the annotators on this slice: interval {_fmt(ceil.alpha_interval)}, "
        f"ordinal {_fmt(ceil.alpha_ordinal)}. n = items scored; coverage = scored / human items of this slice in "
        "the criteria and task families the scorer scores (unscorable and missing items count against it, they "
        "are never dropped silently; see Coverage). Humans: n = items with two or more annotators."
    )


def _coverage_section(d: Doc, data: ReportData) -> None:
    """How each score file met the human items, and what it leaves out on purpose."""
    d.h(2, "Coverage")
    cov_rows = []
    for sc in data.scorers:
        c = sc.coverage
        cov_rows.append(
            [
                sc.name,
                f"`{sc.file}`",
                sc.metric,
                "yes" if sc.on_scale else "no",
                str(c.records),
                str(c.expected),
                str(c.scored),
                str(c.unscorable),
                str(c.missing),
                str(c.unknown_ids),
                str(c.unknown_criterion),
                _pct(c.coverage),
            ]
        )
    d.table(
        [
            "scorer",
            "file",
            "metric",
            "rubric scale",
            "records",
            "human items expected",
            "scored",
            "unscorable",
            "missing",
            "unknown ids",
            "unknown criterion",
            "coverage",
        ],
        cov_rows,
    )
    notes = []
    for sc in data.scorers:
        c = sc.coverage
        notes.append(f"**{sc.name}**: {sc.scale_note}.")
        if c.criteria_not_scored:
            others = c.criteria_not_scored
            named = ", ".join(others) if len(others) <= 4 else f"the {len(others)} other criteria"
            notes.append(
                f"**{sc.name}** scores only {', '.join(c.criteria_scored)}; not compared on "
                f"{named} (not counted as missing)."
            )
        if c.families_not_scored:
            fam = "family" if len(c.families_scored) == 1 else "families"
            notes.append(
                f"**{sc.name}** scores only the task {fam} {', '.join(c.families_scored)}; "
                f"no record for {', '.join(c.families_not_scored)} (not counted as missing)."
            )
        for r in c.unscorable_reasons:
            notes.append(f"**{sc.name}** unscorable ({r.count}): {r.reason}")
    d.ul(notes)


def _breakdown_sections(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    """Per criterion, per task family and per responding model: every scorer beside the human ceiling."""
    crit_slices = data.slices_of("criterion")
    names = [sc.name for sc in data.scorers]
    if len(crit_slices) > 1:
        d.h(2, f"Per criterion ({STAT_LABELS[PLOT_STAT]} with 95% CI)")
        d.table(
            ["criterion", "human items", "alpha (interval)", "humans (LOAO)", *names],
            _comparison_rows(crit_slices, names),
        )
        if "criteria" in plots:
            d.img(plots["criteria"], "Correlation per criterion with 95% intervals; black: human ceiling")
    breakdowns: tuple[tuple[SliceKind, str], ...] = (
        ("family", "Per task family (overall score)"),
        ("model", "Per responding model (overall score)"),
    )
    for kind, heading in breakdowns:
        group = data.slices_of(kind)
        if group:
            d.h(2, f"{heading}, {STAT_LABELS[PLOT_STAT]} with 95% CI")
            d.table(
                [kind, "human items", "alpha (interval)", "humans (LOAO)", *names],
                _comparison_rows(group, names),
            )


def _every_statistic_section(d: Doc, data: ReportData) -> None:
    d.h(2, "Every statistic, per scorer and slice")
    for sc in data.scorers:
        rows = []
        for s in data.slices:
            m = s.scorers.get(sc.name)
            if m is None:
                continue
            pw = m.pairwise
            rows.append(
                [
                    s.title,
                    str(m.n),
                    str(m.n_questions),
                    *(_fmt_ci(m.stat(k), m.small_n) for k in STATS),
                    _fmt(m.mae),
                    _fmt(m.mse),
                    _fmt(m.qwk),
                    _pct(m.within1),
                    f"{_pct(pw.accuracy)} ({pw.n_pairs})",
                ]
            )
        d.h(3, sc.name)
        d.table(
            [
                "slice",
                "n",
                "questions",
                *(STAT_LABELS[k] for k in STATS),
                "MAE",
                "MSE",
                "QWK",
                "within 1",
                "pairwise acc. (pairs)",
            ],
            rows,
        )


def _paired_section(d: Doc, data: ReportData) -> None:
    """The paired comparisons whose difference is defined for at least one correlation."""
    defined = [p for p in data.paired if any(p.stat(k).diff is not None for k in STATS)]
    if not defined:
        return
    d.h(2, "Paired comparisons (A − B, same items, same resamples)")
    rows = []
    for p in defined:
        cells = []
        for k in STATS:
            r = p.stat(k)
            if r.diff is None:
                cells.append("undefined")
            else:
                cells.append(
                    f"{r.diff:+.3f}"
                    + (f" [{r.ci[0]:+.2f}, {r.ci[1]:+.2f}]" if r.ci else "")
                    + f", p = {_fmt(r.p)}"
                    + (" †" if p.small_n else "")
                )
        rows.append([p.a, p.b, data.slice(p.slice).title, str(p.n), *cells])
    d.table(["A", "B", "slice", "n", *(f"Δ {STAT_LABELS[k]} [95% CI], p" for k in STATS)], rows)
    if len(defined) < len(data.paired):
        d.p(
            f"{len(data.paired) - len(defined)} pair(s) left out: a correlation is undefined for one of "
            "the two (constant scores); report.json lists them."
        )


def _bias_section(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    """Bias against humans: length, per responding model, ranking of the models (:mod:`judge.eval.bias`)."""
    bias = data.bias
    if bias is None:
        return
    d.h(2, f"Bias against humans ({bias.criterion} score)")
    d.p(
        "Where a scorer departs from the humans in a systematic way that a correlation can hide: on the "
        f"{bias.criterion} score (every task family), each scorer on the human items it scored, with 95% "
        "intervals from the same question resamples as the main table. Flags are listed under Warnings. "
        f"† marks fewer than {SMALL_N} items or questions."
    )
    if bias.note:
        d.p(bias.note + ".")
    if not bias.scorers:
        return
    scorers = bias.scorers
    d.h(3, "Length")
    d.p(
        f"Response length: {bias.length_definition}. Partial Spearman: the correlation of the scorer's score "
        "with the length among responses the humans scored alike, r_jl.h = (r_jl − r_jh r_hl) / "
        "√((1 − r_jh²)(1 − r_hl²)) with Spearman's r (j scorer, l length, h human). Humans may rightly "
        "prefer more complete, longer responses; only what the scorer adds beyond the human score counts. "
        "Flag: **rewards length** when the interval lies entirely above 0, **penalises length** entirely "
        "below. Text and image counts often go together: the partial given the human score *and* the other "
        "length (the same formula applied again) tells which of the two a scorer follows."
    )
    rows = []
    for name, sb in scorers.items():
        for k, lb in sb.length.items():
            partial = _fmt_ci(lb.partial, sb.small_n) if lb.note is None else f"undefined: {lb.note}"
            other = (
                _fmt_ci(lb.partial_other, sb.small_n)
                if lb.other_note is None
                else f"undefined: {lb.other_note}"
            )
            rows.append(
                [
                    name,
                    MEASURE_LABELS[k],
                    str(lb.n),
                    _fmt(lb.mean, 1),
                    partial,
                    f"**{lb.flag}**" if lb.flag else "–",
                    other,
                    _fmt_ci(lb.scorer_spearman, sb.small_n),
                    _fmt_ci(lb.human_spearman, sb.small_n),
                ]
            )
    d.table(
        [
            "scorer",
            "length",
            "n",
            "mean length",
            "partial Spearman given human [95% CI]",
            "flag",
            "given human and the other length [95% CI]",
            "scorer Spearman with length",
            "humans' Spearman with length",
        ],
        rows,
    )
    _bias_models(d, scorers)
    _bias_ranking(d, scorers)
    if "bias" in plots:
        d.img(plots["bias"], "Bias against humans: partial Spearman with length, relative offset per model")


def _bias_models(d: Doc, scorers: dict[str, ScorerBias]) -> None:
    d.h(3, "Per responding model")
    d.p(
        "Offset: mean(scorer − human) over the model's items. Relative offset: the offset minus the median of "
        "the models' offsets, so that an offset every model shares (a calibration matter: see MAE and the "
        "calibration plot) cancels out, and one model scored off on its own does not make the others look off. "
        "Flag: **over-scored** (**under-scored**) when the relative offset's interval lies entirely above "
        "(below) 0. Scorers on the rubric scale only."
    )
    rows, notes = [], []
    for name, sb in scorers.items():
        if not sb.on_scale:
            continue
        ref = sb.reference_offset
        if ref is not None:
            notes.append(f"**{name}**: median offset over models {_fmt_ci(ref, sb.small_n)}.")
        notes.extend(f"**{name}**: {n}." for n in sb.notes)
        for mo in sb.models:
            rows.append(
                [
                    name,
                    mo.model,
                    str(mo.n),
                    _fmt(mo.human_mean.value),
                    _fmt(mo.scorer_mean.value),
                    _fmt_signed(mo.offset, mo.small_n),
                    _fmt_signed(mo.relative, mo.small_n) if mo.relative is not None else "–",
                    f"**{mo.flag}**" if mo.flag else "–",
                ]
            )
    off = [name for name, sb in scorers.items() if not sb.on_scale]
    if off:
        notes.append(
            f"Not on the rubric scale, so without offsets (length and ranking only): {', '.join(off)}."
        )
    if rows:
        d.table(
            [
                "scorer",
                "model",
                "n",
                "human mean",
                "scorer mean",
                "offset [95% CI]",
                "relative offset [95% CI]",
                "flag",
            ],
            rows,
        )
    d.ul(notes)


def _bias_ranking(d: Doc, scorers: dict[str, ScorerBias]) -> None:
    d.h(3, "Ranking of responding models")
    d.p(
        "The models ranked by mean score (1 = highest; ties share the average rank), by the humans and by the "
        "scorer, on the items the scorer scored; Kendall τb between the two rankings, its interval from "
        "recomputing both rankings on each resample. τb = 1: the scorer orders the models as the humans do "
        "(what a leaderboard needs); −1: the reverse."
    )
    d.table(
        ["scorer", "models", "Kendall τb [95% CI]", "human order", "scorer order", "note"],
        [
            [
                name,
                str(sb.ranking.n_models),
                _fmt_ci(sb.ranking.kendall, sb.small_n),
                _order_text(sb, "human_rank"),
                _order_text(sb, "scorer_rank"),
                sb.ranking.note or "",
            ]
            for name, sb in scorers.items()
        ],
    )
    rows = []
    for name, sb in scorers.items():
        for mo in sorted(sb.models, key=lambda m: (m.human_rank, m.model)):
            rows.append(
                [
                    name,
                    mo.model,
                    str(mo.n),
                    _fmt_ci(mo.human_mean, mo.small_n),
                    f"{mo.human_rank:g}",
                    _fmt_ci(mo.scorer_mean, mo.small_n),
                    f"{mo.scorer_rank:g}",
                ]
            )
    d.table(
        ["scorer", "model", "n", "human mean [95% CI]", "human rank", "scorer mean [95% CI]", "scorer rank"],
        rows,
    )


def _order_text(sb: ScorerBias, rank: str) -> str:
    """The models best first, ``a > b = c`` (``=`` between models of equal rank)."""
    ranked = sorted((getattr(m, rank), m.model) for m in sb.models)
    out = ranked[0][1] if ranked else ""
    for (r0, _), (r1, name) in itertools.pairwise(ranked):
        out += f" {'=' if r1 == r0 else '>'} {name}"
    return out


def _fmt_signed(stat: Interval | None, small: bool = False) -> str:
    if stat is None or stat.value is None:
        return "undefined"
    out = f"{stat.value:+.3f}"
    if stat.ci:
        out += f" [{stat.ci[0]:+.2f}, {stat.ci[1]:+.2f}]"
    return out + (" †" if small else "")


def _plots_section(d: Doc, data: ReportData, plots: dict[str, Path]) -> None:
    d.h(2, "Plots")
    captions = {
        "scatter": f"Each scorer against the human score ({data.main_slice.title}), with the diagonal "
        "(rubric-scale scorers) and the least-squares fit",
        "confusion": "Confusion matrices of rounded scores (rubric-scale scorers, all criteria pooled)",
        "calibration": "Calibration: mean human score per one-point bin of the scorer's score (rubric-scale "
        "scorers, all criteria pooled)",
    }
    for key, cap in captions.items():
        if key in plots:
            d.img(plots[key], cap)
    if "confusion" not in plots:
        d.p("No scorer on the rubric scale: no confusion matrix and no calibration plot.")


def _comparison_rows(slices: Sequence[SliceReport], names: Sequence[str]) -> list[list[str]]:
    rows = []
    for s in slices:
        small_h = s.n_items < SMALL_N or s.n_questions < SMALL_N
        row = [
            s.label,
            str(s.n_items),
            _fmt(s.ceiling.alpha_interval),
            _fmt_ci(s.ceiling.loao.stat(PLOT_STAT), small_h),
        ]
        for n in names:
            m = s.scorers.get(n)
            row.append("–" if m is None else f"{_fmt_ci(m.stat(PLOT_STAT), m.small_n)} (n={m.n})")
        rows.append(row)
    return rows


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
