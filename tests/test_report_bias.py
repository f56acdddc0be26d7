"""Bias against humans in judge-report (judge.eval.bias): the statistics against scipy and numpy on small
hand-made data, the flags on synthetic judges of known bias, and the section and fields of a real report."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from judge.cli.report import main
from judge.core.io import load_annotations
from judge.core.schema import ImageSegment, TextSegment
from judge.data.aggregate import aggregate_record
from judge.eval.bias import length_bias, per_model, response_length
from judge.eval.bias_stats import (
    kendall_tau_b_rows,
    partial_spearman,
    partial_undefined_reason,
    weighted_group_means,
    weighted_partial_spearman,
)
from judge.eval.bootstrap import ClusterBootstrap, percentile_interval, seeded_rng
from judge.eval.report_data import load_report

DEMO = Path(__file__).resolve().parents[1] / "annotations" / "demo" / "annotations.jsonl"
MODELS = ["model-a", "model-b", "model-c"]


def synthetic(n_q: int = 40, seed: int = 0, spread: float = 1.0):
    """``n_q`` questions, each answered once by model-a, -b and -c (human means about 4, 3 and 2 with
    ``spread`` 1); humans like longer texts a little. Returns human, text length, models, clusters."""
    rng = np.random.default_rng(seed)
    n = 3 * n_q
    models = np.array(MODELS * n_q)
    length = rng.integers(10, 80, n).astype(float)
    base = np.array([4.0, 3.0, 2.0] * n_q)
    latent = 3.0 + spread * (base - 3.0) + rng.normal(0, 1.0, n) + 0.02 * (length - 45)
    human = np.clip(np.round(latent), 0, 6)
    clusters = [f"q{i // 3}" for i in range(n)]
    return human, length, list(models), clusters


def centred_noise(models, sd: float, seed: int) -> np.ndarray:
    """Normal noise whose mean over each model's items is exactly 0: no model is favoured by chance."""
    noise = np.random.default_rng(seed).normal(0, sd, len(models))
    for m in set(models):
        mine = np.array(models) == m
        noise[mine] -= noise[mine].mean()
    return noise


def plan_for(clusters, n_boot: int = 300, key: str = "test") -> ClusterBootstrap:
    return ClusterBootstrap(clusters, n_boot, seeded_rng(0, key))


def rank_residual_partial(j, ln, h, *controls) -> float:
    """Partial Spearman computed directly: Pearson of the residuals of rank(j) and rank(l) after least squares
    on rank(h) (and the ranks of further controls)."""
    x = np.column_stack([np.ones(len(j)), *(stats.rankdata(c) for c in (h, *controls))])

    def resid(v):
        rv = stats.rankdata(v)
        return rv - x @ np.linalg.lstsq(x, rv, rcond=None)[0]

    return float(stats.pearsonr(resid(j), resid(ln)).statistic)


# ----------------------------------------------------------------------------- length


def test_response_length_counts_words_of_the_text_parts_and_the_image_parts():
    content = [
        TextSegment(text="Hello, world! It's 3pm."),  # Hello / world / It / s / 3pm
        ImageSegment(image="a.png"),
        TextSegment(text="snake_case"),  # \w includes the underscore: one token
        TextSegment(text="end"),  # parts are joined with a space: "end" and "ing" stay two tokens
        TextSegment(text="ing"),
        ImageSegment(image="b.png"),
    ]
    assert response_length(content) == (8, 2)
    assert response_length([]) == (0, 0) and response_length(None) == (0, 0)
    assert response_length([TextSegment(text="— ... !")]) == (0, 0)


def test_partial_spearman_equals_the_correlation_of_rank_residuals_and_the_formula():
    rng = np.random.default_rng(1)
    n = 60
    h = rng.integers(0, 7, n).astype(float)  # ties, as human means have
    m = rng.integers(0, 3, n).astype(float)
    ln = rng.integers(5, 60, n) + 4.0 * h + 10.0 * m
    j = h + 0.05 * ln + rng.normal(0, 1, n)
    value = partial_spearman(j, ln, h)
    assert value == pytest.approx(rank_residual_partial(j, ln, h), abs=1e-10)

    def r(a, b):
        return stats.spearmanr(a, b).statistic

    formula = (r(j, ln) - r(j, h) * r(h, ln)) / math.sqrt((1 - r(j, h) ** 2) * (1 - r(h, ln) ** 2))
    assert value == pytest.approx(formula, abs=1e-12)
    # given the other length measure too: the residuals after both controls
    assert partial_spearman(j, ln, h, m) == pytest.approx(rank_residual_partial(j, ln, h, m), abs=1e-10)
    assert abs(partial_spearman(j, ln, h, m) - value) > 1e-3  # the control changes something here


def test_weighted_partial_spearman_equals_it_on_the_expanded_resamples():
    rng = np.random.default_rng(2)
    n = 45
    h = rng.integers(0, 7, n).astype(float)
    m = rng.integers(1, 3, n).astype(float)
    ln = rng.integers(5, 40, n) + 3.0 * h
    j = np.round(h + 0.05 * ln + rng.normal(0, 1, n), 1)
    clusters = [f"q{i // 3}" for i in range(n)]
    plan = plan_for(clusters, 40)
    w = plan.weights(clusters)
    first = weighted_partial_spearman(j, ln, h, w)
    second = weighted_partial_spearman(j, ln, h, w, other=m)
    assert np.isfinite(first).all()
    for b in range(w.shape[0]):
        k = w[b].astype(int)

        def e(x, k=k):
            return np.repeat(x, k)

        for got, expect in (
            (first[b], partial_spearman(e(j), e(ln), e(h))),
            (second[b], partial_spearman(e(j), e(ln), e(h), e(m))),
        ):
            if expect is None:
                assert np.isnan(got)
            else:
                assert got == pytest.approx(expect, abs=1e-9)


def test_an_undefined_partial_is_none_with_a_reason_never_nan():
    h, ln, _, clusters = synthetic(n_q=10)
    j = h + 0.05 * ln
    plan = plan_for(clusters, 50)
    one_image = np.ones_like(ln)
    assert partial_spearman(j, one_image, h) is None
    assert "same number of images" in partial_undefined_reason(j, one_image, h, what="number of images")
    lb = length_bias(j, h, one_image, clusters, plan, "images", other=ln)
    assert lb.partial.value is None and lb.partial.ci is None and lb.partial.n_valid == 0
    assert lb.flag is None and "same number of images (1)" in lb.note and lb.distinct == 1
    assert lb.scorer_spearman.value is None and lb.human_spearman.value is None
    # the text-token analysis beside it: the constant image count is nothing to control for
    lt = length_bias(j, h, ln, clusters, plan, "text_tokens", other=one_image)
    assert lt.partial.value is not None and lt.partial_other.value is None
    assert "nothing to control for" in lt.other_note
    assert partial_spearman(h, ln, h) is None  # a scorer ranking as the humans do: nothing left
    assert "exactly as the humans" in partial_undefined_reason(h, ln, h)
    assert partial_spearman([1.0, 2.0], [3.0, 4.0], [1.0, 3.0]) is None
    assert "at least 3" in partial_undefined_reason([1.0, 2.0], [3.0, 4.0], [1.0, 3.0])
    json.dumps(lb.model_dump(mode="json"), allow_nan=False)  # strict JSON: null, never NaN


def test_a_judge_that_follows_length_is_flagged_and_one_that_follows_the_humans_is_not():
    h, ln, _, clusters = synthetic(n_q=40, seed=3)
    plan = plan_for(clusters)
    noise = np.random.default_rng(4).normal(0, 0.5, h.size)
    lengthy = length_bias(h + 0.03 * ln + noise, h, ln, clusters, plan)
    assert lengthy.partial.ci[0] > 0 and lengthy.flag == "rewards length"
    terse = length_bias(h - 0.03 * ln + noise, h, ln, clusters, plan)
    assert terse.partial.ci[1] < 0 and terse.flag == "penalises length"
    # humans like longer texts here, and so does a judge that follows them: its plain Spearman with length
    # is clearly positive, but nothing beyond the human score is, and it is not flagged
    fair = length_bias(h + noise, h, ln, clusters, plan)
    assert fair.human_spearman.ci[0] > 0 and fair.scorer_spearman.ci[0] > 0
    assert fair.partial.ci[0] < 0 < fair.partial.ci[1] and fair.flag is None
    equal = length_bias(h, h, ln, clusters, plan)
    assert equal.flag is None and equal.partial.value is None and "exactly as the humans" in equal.note


# ----------------------------------------------------------------------------- per model


def test_weighted_group_means_equal_the_expanded_means():
    rng = np.random.default_rng(5)
    x = rng.normal(size=12)
    codes = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    w = np.array([[1, 0, 2, 0, 0, 1, 3, 0, 0, 1, 0, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0]], dtype=float)
    got = weighted_group_means(x, codes, 4, w)
    for b in range(2):
        for g in range(4):
            expanded = np.repeat(x[codes == g], w[b][codes == g].astype(int)) if g < 3 else np.array([])
            if expanded.size:
                assert got[b, g] == pytest.approx(expanded.mean())
            else:
                assert np.isnan(got[b, g])  # the group is absent from the resample
    assert np.isnan(got[0, 1])  # model 1 has weight 0 in the first resample


def test_a_judge_favouring_one_model_flags_that_model_only():
    h, _, models, clusters = synthetic(n_q=40, seed=6)
    plan = plan_for(clusters)
    noise = centred_noise(models, 0.5, seed=7)
    mb = np.array(models) == "model-b"
    rows, ref, _ = per_model(h + noise + mb, h, models, clusters, plan)
    assert {r.model: r.flag for r in rows} == {"model-a": None, "model-b": "over-scored", "model-c": None}
    # the numbers: offset = mean(j - h) per model, relative = offset minus the median offset
    d = noise + mb
    offsets = {m: d[np.array(models) == m].mean() for m in MODELS}
    med = float(np.median(list(offsets.values())))
    assert ref.value == pytest.approx(med)
    for r in rows:
        assert r.offset.value == pytest.approx(offsets[r.model])
        assert r.relative.value == pytest.approx(offsets[r.model] - med)
        assert r.n == 40 and r.n_questions == 40
    # the relative interval: the percentile interval of (model mean - median of model means) on each
    # expanded resample
    w = plan.weights(clusters).astype(int)
    reps = []
    for b in range(w.shape[0]):
        means = [np.repeat(d[np.array(models) == m], w[b][np.array(models) == m]).mean() for m in MODELS]
        reps.append(means[1] - np.median(means))
    assert rows[1].relative.ci == pytest.approx(percentile_interval(np.array(reps)))

    mc = np.array(models) == "model-c"
    rows, _, _ = per_model(h + noise - mc, h, models, clusters, plan)
    assert {r.model: r.flag for r in rows} == {"model-a": None, "model-b": None, "model-c": "under-scored"}


def test_an_offset_every_model_shares_flags_none():
    h, _, models, clusters = synthetic(n_q=40, seed=6)
    plan = plan_for(clusters)
    h = h + np.resize([0.0, 1 / 3, 2 / 3, 1 / 3], h.size)  # means of three annotators: thirds
    # exactly +1 for everyone: (h + 1) - h is 1 only up to rounding, and so the relative offsets are 0
    rows, ref, _ = per_model(h + 1.0, h, models, clusters, plan)
    assert ref.value == pytest.approx(1.0) and all(r.flag is None for r in rows)
    assert all(r.relative.value == pytest.approx(0.0, abs=1e-12) for r in rows)
    noise = centred_noise(models, 0.5, seed=7)
    rows, ref, _ = per_model(h + 1.0 + noise, h, models, clusters, plan)
    assert all(r.flag is None for r in rows)
    assert all(r.offset.ci[0] > 0 for r in rows)  # every raw offset is off: a calibration matter, not a flag


def test_two_models_one_model_and_a_scorer_off_the_scale():
    h, _, models, clusters = synthetic(n_q=30, seed=8)
    keep = np.array(models) != "model-c"
    h2, m2, c2 = h[keep], list(np.array(models)[keep]), list(np.array(clusters)[keep])
    plan = plan_for(c2)
    rows, ref, ranking = per_model(h2 + 0.8 * (np.array(m2) == "model-a"), h2, m2, c2, plan)
    # two models: the median is their mean, relative offsets are +- half the difference, both flagged
    assert rows[0].relative.value == pytest.approx(0.4) and rows[1].relative.value == pytest.approx(-0.4)
    assert [r.flag for r in rows] == ["over-scored", "under-scored"]
    assert ranking.n_models == 2 and ranking.kendall.value == 1.0 and "two models" in ranking.note

    only = np.array(models) == "model-a"
    h1, m1, c1 = h[only], list(np.array(models)[only]), list(np.array(clusters)[only])
    rows, ref, ranking = per_model(h1 + 1, h1, m1, c1, plan_for(c1))
    assert ref is None and rows[0].relative is None and rows[0].flag is None
    assert rows[0].offset.value == pytest.approx(1.0)
    assert (
        ranking.kendall.value is None
        and ranking.kendall.ci is None
        and "single responding model" in ranking.note
    )

    clip = 0.2 + 0.05 * h  # a CLIPScore-like scorer: its means rank models, its offsets mean nothing
    rows, ref, ranking = per_model(clip, h, models, clusters, plan_for(clusters), on_scale=False)
    assert ref is None and all(r.offset is None and r.relative is None and r.flag is None for r in rows)
    assert ranking.kendall.value == 1.0 and rows[0].scorer_mean.value == pytest.approx(clip[::3].mean())


# ----------------------------------------------------------------------------- ranking


def test_kendall_rows_equal_scipy_tau_b_with_ties():
    rng = np.random.default_rng(9)
    x = rng.integers(0, 3, (60, 5)).astype(float)
    y = rng.integers(0, 3, (60, 5)).astype(float)
    x[0] = 1.0  # every model tied: undefined
    y[1, 2] = np.nan  # a model missing from the resample: undefined
    got = kendall_tau_b_rows(x, y)
    for b in range(60):
        if b == 1:
            assert np.isnan(got[b])
            continue
        expect = stats.kendalltau(x[b], y[b], variant="b").statistic
        if np.isnan(expect):
            assert np.isnan(got[b])
        else:
            assert got[b] == pytest.approx(expect, abs=1e-12)
    assert np.isnan(got[0]) and np.isfinite(got).sum() > 40


def test_ranking_tau_is_one_for_the_humans_order_and_minus_one_for_the_reverse():
    h, _, models, clusters = synthetic(n_q=40, seed=10, spread=1.5)
    plan = plan_for(clusters)
    noise = np.random.default_rng(11).normal(0, 0.3, h.size)
    rows, _, same = per_model(h + noise, h, models, clusters, plan)
    assert same.kendall.value == 1.0 and same.kendall.ci == [1.0, 1.0]
    assert same.human_order == same.scorer_order == MODELS
    assert [r.human_rank for r in rows] == [r.scorer_rank for r in rows] == [1.0, 2.0, 3.0]
    _, _, reverse = per_model(6 - h, h, models, clusters, plan)
    assert reverse.kendall.value == -1.0 and reverse.scorer_order == MODELS[::-1]

    # five models, ties: tau-b of the model means as scipy computes it, ranks as scipy's rankdata
    rng = np.random.default_rng(12)
    five = [f"m{i}" for i in range(5)] * 12
    cl = [f"q{i // 5}" for i in range(60)]
    hh = rng.integers(0, 7, 60).astype(float)
    jj = np.array([{"m0": 5.0, "m1": 5.0, "m2": 3.0, "m3": 1.0, "m4": 2.0}[m] for m in five])  # m0 = m1
    rows, _, ranking = per_model(jj, hh, five, cl, plan_for(cl))
    hm = [hh[np.array(five) == f"m{i}"].mean() for i in range(5)]
    assert ranking.kendall.value == pytest.approx(
        stats.kendalltau([5, 5, 3, 1, 2], hm, variant="b").statistic
    )
    assert [r.scorer_rank for r in rows] == [1.5, 1.5, 3.0, 5.0, 4.0]
    assert [r.human_rank for r in rows] == list(stats.rankdata([-v for v in hm]))
    flat = per_model(np.full(60, 3.0), hh, five, cl, plan_for(cl))[2]
    assert flat.kendall.value is None and "same mean score" in flat.note


# ----------------------------------------------------------------------------- judge-report


def _score_file(path, records, score, metric="judge"):
    rows = [
        dict(
            id=r.id,
            benchmark="demo",
            task=r.task,
            model=r.model,
            metric=metric,
            criterion="overall",
            score=float(score(r, aggregate_record(r)["overall"].value)),
        )
        for r in records
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    return path


def test_judge_report_writes_the_bias_section_and_fields(tmp_path, capsys):
    records = load_annotations(DEMO, check_images=False).records
    rng = np.random.default_rng(0)
    lengthy = _score_file(
        tmp_path / "lengthy.jsonl",
        records,
        lambda r, h: np.clip(h + 0.06 * (response_length(r.response)[0] - 45) + rng.normal(0, 0.3), 0, 6),
    )
    favour = _score_file(
        tmp_path / "favour.jsonl",
        records,
        lambda r, h: np.clip(h + rng.normal(0, 0.3) + (r.model == "model-b"), 0, 6),
    )
    clip = _score_file(tmp_path / "clip.jsonl", records, lambda r, h: 0.3 + 0.01 * h, metric="clipscore")
    one = _score_file(tmp_path / "one.jsonl", records[:1], lambda r, h: h)
    out = tmp_path / "report"
    argv = ["--human", str(DEMO), "--criterion", "overall", "--bootstrap", "100", "--out", str(out)]
    for name, f in (("lengthy", lengthy), ("favour", favour), ("clip", clip), ("one", one)):
        argv += ["--scores", f"{name}={f}"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "lengthy: bias against humans: rewards length (text tokens" in printed

    data = json.loads((out / "report.json").read_text())
    bias = data["bias"]
    assert (bias["criterion"], bias["n_items"], bias["n_questions"]) == ("overall", 750, 250)
    assert list(bias["scorers"]) == ["lengthy", "favour", "clip"] and "one" in bias["note"]
    ly, fv, cl = (bias["scorers"][n] for n in ("lengthy", "favour", "clip"))
    assert ly["length"]["text_tokens"]["flag"] == "rewards length"
    assert ly["length"]["text_tokens"]["partial"]["n_valid"] == 100
    assert fv["length"]["text_tokens"]["flag"] is None
    assert {m["model"]: m["flag"] for m in fv["models"]} == {
        "model-a": None,
        "model-b": "over-scored",
        "model-c": None,
    }
    assert fv["ranking"]["human_order"] == ["model-a", "model-b", "model-c"]
    # CLIPScore-like, off the rubric scale: length and ranking, no offsets
    assert not cl["on_scale"] and cl["reference_offset"] is None
    assert all(m["offset"] is None and m["relative"] is None for m in cl["models"])
    assert cl["ranking"]["kendall"]["value"] == 1.0 and cl["length"]["images"]["partial"]["value"] is None
    assert any(w.startswith("favour: bias against humans: model-b over-scored") for w in data["warnings"])
    assert (out / "bias.png").stat().st_size > 0 and data["plots"]["bias"] == "bias.png"

    typed = load_report(out / "report.json")
    assert typed.to_json() == data
    assert typed.bias.scorers["favour"].models[1].flag == "over-scored"
    assert typed.bias.scorers["lengthy"].length["text_tokens"].partial.ci[0] > 0

    md = (out / "report.md").read_text()
    section = md.split("## Bias against humans (overall score)")[1].split("\n## ")[0]
    for heading in ("### Length", "### Per responding model", "### Ranking of responding models"):
        assert heading in section
    assert "**rewards length**" in section and "**over-scored**" in section
    assert "lies entirely above (below) 0" in section  # the flag rule is stated
    assert "| favour | model-b | 250 |" in section and "model-a > model-b > model-c" in section
    assert "Not on the rubric scale, so without offsets (length and ranking only): clip." in section
    assert "](bias.png)" in section


def test_no_overall_scores_means_no_bias_analysis_and_says_why(tmp_path, small_demo):
    records = load_annotations(small_demo, check_images=False).records
    rows = [
        dict(id=r.id, benchmark="demo", task=r.task, metric="judge", criterion="text_quality", score=3.0)
        for r in records
    ]
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in rows))
    out = tmp_path / "r"
    argv = ["--human", str(small_demo), "--scores", f"j={f}", "--criterion", "text_quality"]
    assert main([*argv, "--bootstrap", "20", "--out", str(out)]) == 0
    bias = load_report(out / "report.json").bias
    assert bias.scorers == {} and "no human overall scores" in bias.note
    md = (out / "report.md").read_text()
    assert "## Bias against humans" in md and "no human overall scores" in md and "### Length" not in md


def test_the_median_model_is_the_reference_without_a_zero_width_interval():
    """Issue 38 (review 6): the median model's relative offset is 0 by construction; the resamples where it
    stays the median gave it a [0, 0] interval. It is the reference now, with no interval, and no model's
    relative offset has a zero-width interval."""
    h, _, models, clusters = synthetic(n_q=40, seed=0)
    plan = plan_for(clusters)
    noise = centred_noise(models, 0.5, seed=7)
    offset = np.select([np.array(models) == m for m in MODELS], [0.8, 0.0, -0.8])  # model-b in the middle
    rows, ref, _ = per_model(h + noise + offset, h, models, clusters, plan)
    by = {r.model: r for r in rows}
    assert (
        by["model-b"].reference and by["model-b"].relative.value == 0.0 and by["model-b"].relative.ci is None
    )
    assert not by["model-a"].reference and not by["model-c"].reference
    for r in rows:
        ci = r.relative.ci
        assert ci is None or ci[1] > ci[0]
    assert by["model-a"].flag == "over-scored" and by["model-c"].flag == "under-scored"
