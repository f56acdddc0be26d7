"""Calibration: fitting (judge.eval.calibration) against scikit-learn, crepes and hand computations; applying it
(judge.models.calibration) where the score is read out; the file, the card, and every scoring path."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from judge.core.errors import ConfigError
from judge.eval.calibration import (
    LabelledScore,
    conformal_halfwidths,
    fit_calibration,
    fit_isotonic,
    fit_temperature,
    rating_nll,
    split_questions,
)
from judge.models.calibration import (
    POOLED,
    Calibration,
    CriterionCalibration,
    calibrated_fields,
    interpolate,
    read_calibration,
    temper,
    tempered_expectation,
    write_calibration,
)

VALUES = list(range(7))


def _dist(mu: float, width: float = 0.9) -> tuple[float, ...]:
    p = np.exp(-0.5 * ((np.arange(7) - mu) / width) ** 2)
    return tuple((p / p.sum()).tolist())


def synthetic(n_questions: int, seed: int, criteria=("overall", "text_quality"), per_question: int = 3):
    """A judge that is biased (scores 1.2 low, compressed) and noisy against three annotators."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for r in range(per_question):
            for crit in criteria:
                truth = rng.uniform(0, 6)
                ratings = tuple(int(np.clip(round(truth + rng.normal(0, 0.7)), 0, 6)) for _ in range(3))
                human = float(np.mean(ratings))
                mu = float(np.clip(0.6 * human + 0.3 + rng.normal(0, 0.5), 0, 6))
                d = _dist(mu)
                out.append(
                    LabelledScore(f"q{q}-r{r}", crit, f"q{q}", float(np.dot(d, VALUES)), d, human, ratings)
                )
    return out


def test_isotonic_knots_reproduce_sklearn_predict():
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    raw = rng.uniform(0.5, 5.5, 300)
    human = np.clip(raw + rng.normal(0, 1, 300), 0, 6)
    x, y = fit_isotonic(raw, human, (0, 6))
    ref = IsotonicRegression(y_min=0, y_max=6, out_of_bounds="clip").fit(raw, human)
    probe = np.r_[-1.0, 0.0, 0.3, np.linspace(0, 6, 601), raw, 6.5]
    ours = np.asarray([interpolate(v, x, y) for v in probe])
    assert np.max(np.abs(ours - ref.predict(probe))) < 1e-12
    assert all(b > a for a, b in zip(x, x[1:], strict=False)) and all(
        b >= a for a, b in zip(y, y[1:], strict=False)
    )


def test_tempering_is_dividing_the_scale_logits():
    from scipy.special import softmax

    p = np.asarray(_dist(2.3, 1.4))
    for t in (0.3, 1.0, 2.5):
        assert np.allclose(temper(p, t), softmax(np.log(p) / t), atol=1e-15)
        assert tempered_expectation(p, VALUES, t) == pytest.approx(
            float(np.dot(softmax(np.log(p) / t), VALUES))
        )
    assert temper([0.0, 0.25, 0.75], 2.0)[0] == 0.0  # an impossible value stays impossible


def test_fitted_temperature_minimises_the_rating_nll_and_finds_a_planted_one():
    rng = np.random.default_rng(1)
    model = [_dist(rng.uniform(0, 6), 0.6) for _ in range(800)]
    planted = 1.8  # the annotators are less certain than the model: their distribution is model ** (1 / 1.8)
    ratings = [tuple(rng.choice(7, size=3, p=temper(p, planted))) for p in model]
    t = fit_temperature(model, ratings, VALUES)
    assert t == pytest.approx(planted, rel=0.08)
    grid = np.exp(np.linspace(-1, 1.5, 501))
    nll = [rating_nll(np.asarray(model), ratings, VALUES, g) for g in grid]
    assert rating_nll(np.asarray(model), ratings, VALUES, t) <= min(nll) + 1e-6


def test_conformal_halfwidths_are_crepes_and_the_order_statistic():
    from crepes import ConformalRegressor

    rng = np.random.default_rng(2)
    res = rng.normal(0, 1, 59)
    groups = ["a"] * 42 + ["b"] * 12 + ["c"] * 5
    half = conformal_halfwidths(res, groups, 0.9)
    for g in ("a", "b"):  # 42 and 12: 0.1 (n + 1) is not whole, and crepes agrees
        r = np.sort(np.abs(res[np.asarray(groups) == g]))
        n = r.size
        assert half[g] == r[int(np.ceil(0.9 * (n + 1))) - 1]  # the ceil(level (n + 1))-th smallest
        single = ConformalRegressor().fit(res[np.asarray(groups) == g])
        assert single.predict_int(np.zeros(1), confidence=0.9)[0, 1] == half[g]
    assert half["c"] is None  # 5 residuals cannot give a 90% interval: the whole scale


@pytest.mark.parametrize("n", [19, 29, 39])
def test_conformal_quantile_where_crepes_takes_one_order_statistic_too_many(n):
    from crepes import ConformalRegressor

    from judge.eval.calibration import conformal_quantile

    rng = np.random.default_rng(n)
    res = rng.normal(0, 1, n)
    r = np.sort(np.abs(res))
    k = (9 * (n + 1)) // 10  # 0.1 (n + 1) is whole: the k-th smallest, exactly (n = 19: the 18th of 19)
    assert conformal_quantile(res, 0.9) == r[k - 1]
    crepes_end = ConformalRegressor().fit(res).predict_int(np.zeros(1), confidence=0.9)[0, 1]
    assert crepes_end == r[k]  # crepes 0.9: int(0.09999.. x (n + 1)) - 1 from the top, one residual further
    # What it costs: over many draws, ours covers a new residual exactly 90% of the time, crepes' 90% + 1/(n+1).
    draws = rng.normal(0, 1, (20000, n + 1))
    cal, new = np.sort(np.abs(draws[:, :n]), axis=1), np.abs(draws[:, n])
    assert abs(np.mean(new <= cal[:, k - 1]) - 0.9) < 0.007
    assert abs(np.mean(new <= cal[:, k]) - (0.9 + 1 / (n + 1))) < 0.007


def test_the_split_keeps_questions_whole_and_is_seeded():
    qs = [f"q{i}" for i in range(40) for _ in range(3)]
    a, b = split_questions(qs, 0.5, 0), split_questions(qs, 0.5, 0)
    assert a == b and len(a) == 20 and split_questions(qs, 0.5, 1) != a
    assert len(split_questions(qs, 0.99, 0)) == 39  # one question is always left to fit on


def test_fitted_calibration_applies_as_fitted_and_covers_new_items_at_its_level():
    cal = fit_calibration(synthetic(150, 3), VALUES, method="isotonic", level=0.9, min_items=30, seed=0)
    assert set(cal.criteria) == {"overall", "text_quality"}
    assert cal.data.n_items == 150 * 3 * 2 and cal.data.n_questions == 150
    # Held out from both fits: the isotonic map removes the judge's shift, which a temperature cannot.
    cmp = cal.comparison
    assert (
        cmp["isotonic"]["mae"] < 0.8 * cmp["raw"]["mae"]
        and cmp["isotonic"]["mae"] < cmp["temperature"]["mae"]
    )
    # New items of the same kind: the intervals cover 90% of their human scores, about.
    fresh = synthetic(1500, 4)
    applied = [cal.apply(s.criterion, s.raw, s.distribution) for s in fresh]
    covered = np.mean(
        [a.interval[0] <= s.human <= a.interval[1] for a, s in zip(applied, fresh, strict=True)]
    )
    assert 0.87 <= covered <= 0.93
    mae_raw = np.mean([abs(s.raw - s.human) for s in fresh])
    mae_cal = np.mean([abs(a.score - s.human) for a, s in zip(applied, fresh, strict=True)])
    assert mae_cal < 0.8 * mae_raw
    # The interval is the calibrated score -/+ the criterion's halfwidth, clipped to the scale.
    s, a = fresh[0], applied[0]
    cc = cal.criteria[s.criterion]
    assert a.score == pytest.approx(interpolate(s.raw, cc.x, cc.y))
    assert a.interval == [max(0.0, a.score - cc.halfwidth), min(6.0, a.score + cc.halfwidth)]


def _fit_part(cal, data):
    from judge.eval.calibration import conformal_part

    held = {(s.id, s.criterion) for s in conformal_part(cal, data)}
    return [s for s in data if (s.id, s.criterion) not in held]


def test_temperature_map_is_softmax_of_scaled_logits_minimising_sklearn_log_loss():
    from scipy.special import softmax
    from sklearn.metrics import log_loss

    data = synthetic(60, 5)
    cal = fit_calibration(data, VALUES, method="temperature", min_items=30)
    cc = cal.criteria["overall"]
    assert cc.method == "temperature" and cc.x is None
    s = synthetic(1, 6)[0]
    view = cal.apply("overall", s.raw, s.distribution)
    want = softmax(np.log(s.distribution) / cc.temperature)  # the logits divided by T
    assert view.distribution == pytest.approx(want.tolist(), abs=1e-12)
    assert view.score == pytest.approx(float(want @ np.arange(7)), abs=1e-12)
    assert view.argmax == int(np.argmax(want))
    # T minimises scikit-learn's log loss of the fit part's ratings (one row per rating).
    fit = [x for x in _fit_part(cal, data) if x.criterion == "overall"]
    rows = [(x.distribution, r) for x in fit for r in x.ratings]

    def loss(t: float) -> float:
        return log_loss([r for _, r in rows], [softmax(np.log(d) / t) for d, _ in rows], labels=VALUES)

    assert loss(cc.temperature) <= min(loss(cc.temperature * f) for f in (0.9, 0.97, 1.03, 1.1)) + 1e-9


def _closest_with_mean(p: np.ndarray, mean: float):
    """scipy's SLSQP: the distribution q minimising KL(q || p) subject to sum q = 1 and mean q = ``mean``."""
    from scipy.optimize import minimize

    return minimize(
        lambda q: float(np.sum(q * np.log(np.clip(q, 1e-300, None) / p))),
        p,
        method="SLSQP",
        bounds=[(0, 1)] * 7,
        constraints=[
            {"type": "eq", "fun": lambda q: q.sum() - 1},
            {"type": "eq", "fun": lambda q: q @ np.arange(7) - mean},
        ],
        options={"ftol": 1e-14, "maxiter": 500},
    )


def test_isotonic_view_is_the_closest_distribution_with_the_maps_mean():
    cal = fit_calibration(synthetic(80, 3), VALUES, method="isotonic", min_items=30)
    for s in synthetic(4, 11):
        view = cal.apply(s.criterion, s.raw, s.distribution)
        p = np.asarray(s.distribution)
        assert float(np.dot(view.distribution, VALUES)) == pytest.approx(view.score, abs=1e-9)
        # Independently: minimise KL(q || p) subject to sum q = 1 and mean q = the isotonic score.
        res = _closest_with_mean(p, view.score)
        assert view.distribution == pytest.approx(res.x.tolist(), abs=2e-4)
        assert view.argmax == VALUES[int(np.argmax(view.distribution))]


def overconfident(n_questions: int, seed: int, planted: float = 1.8):
    """A judge whose distributions are right on average but too sharp: the annotators' ratings are drawn
    from the judge's distribution tempered by ``planted``."""
    from judge.models.calibration import temper

    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for r in range(3):
            for crit in ("overall", "text_quality"):
                d = _dist(rng.uniform(0.5, 5.5), 0.6)
                ratings = tuple(int(v) for v in rng.choice(7, size=3, p=temper(d, planted)))
                out.append(
                    LabelledScore(f"q{q}-r{r}", crit, f"q{q}", float(np.dot(d, VALUES)), d, float(np.mean(ratings)),
                                  ratings, ("a1", "a2", "a3"))
                )  # fmt: skip
    return out


def test_auto_chooses_the_map_by_held_out_nll_and_it_lowers_the_nll_of_new_ratings():
    from sklearn.metrics import log_loss

    cal = fit_calibration(overconfident(120, 1), VALUES, min_items=30)
    assert cal.method == "auto"
    choice = cal.comparison["choice"]
    for key in ("overall", "text_quality", POOLED):
        c = choice[key]
        assert c["method"] == "temperature" and c["nll"]["temperature"] < c["nll"]["none"]
        assert len(c["fold_temperatures"]) == c["folds"] == 5  # the fit's spread across folds, reported
        assert all(1.3 < t < 2.5 for t in c["fold_temperatures"])
    # On the conformal part and on new ratings: the calibrated distributions fit the ratings better
    # (scikit-learn's log loss; every other measure of the comparison too).
    cmp = cal.comparison
    for k in ("nll", "brier", "ece_top"):
        assert cmp["calibrated"][k] < cmp["raw"][k]
    fresh = overconfident(200, 2)
    y = [r for s in fresh for r in s.ratings]
    raw = [s.distribution for s in fresh for _ in s.ratings]
    calib = [cal.apply(s.criterion, s.raw, s.distribution).distribution for s in fresh for _ in s.ratings]
    assert log_loss(y, calib, labels=VALUES) < log_loss(y, raw, labels=VALUES) - 0.02


@pytest.mark.parametrize("seed", range(3))
def test_a_judge_already_calibrated_keeps_its_read_out(seed):
    # Ratings drawn from the judge's own distributions: no map can help, and one that looks better on a
    # few folds by chance (within its standard error across folds) is not taken.
    cal = fit_calibration(overconfident(60, seed, planted=1.0), VALUES, min_items=30)
    for key, c in cal.comparison["choice"].items():
        assert c["method"] == "none" and "standard error" in c["reason"], (key, c)
    s = overconfident(1, 99)[0]
    view = cal.apply(s.criterion, s.raw, s.distribution)
    assert view.distribution == list(s.distribution) and view.score == s.raw


def signal_free(n_questions: int, seed: int):
    """A judge that is sure of itself and says nothing about the responses: its scores and the humans'
    are independent (the newcomer's 80-step judge: temperature ran to its bound, every score became 3)."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for r in range(3):
            d = _dist(rng.uniform(0.5, 5.5), 0.35)
            ratings = tuple(int(v) for v in rng.integers(0, 7, 3))
            out.append(LabelledScore(f"q{q}-r{r}", "overall", f"q{q}", float(np.dot(d, VALUES)), d,
                                     float(np.mean(ratings)), ratings))  # fmt: skip
    return out


def test_a_fit_that_hits_its_bound_or_flattens_the_scores_is_refused():
    from judge.core.errors import JudgeError

    data = signal_free(80, 3)
    with pytest.raises(
        JudgeError, match="temperature calibration of .* refused: .*(end of its search range|flattens)"
    ):
        fit_calibration(data, VALUES, method="temperature", min_items=30)
    cal = fit_calibration(data, VALUES, min_items=30)  # auto: the read-out is kept, and it says why
    c = cal.comparison["choice"]["overall"]
    assert "temperature" in c["refused"] and c["method"] in ("none", "isotonic")
    if c["method"] == "none":
        assert cal.criteria["overall"].method == "none"
    s = data[0]
    view = cal.apply("overall", s.raw, s.distribution)
    spread = np.std([cal.apply("overall", x.raw, x.distribution).score for x in data])
    assert spread > 0.25 * np.std([x.raw for x in data])  # the scores keep their spread
    assert view.interval[0] <= view.score <= view.interval[1]
    from judge.eval.calibration_report import format_calibration

    printed = format_calibration(cal)
    assert "temperature refused" in printed and "Held-out comparison" in printed and "NLL" in printed


def test_criteria_with_few_items_take_the_pooled_calibration():
    data = synthetic(40, 7) + [
        LabelledScore(f"x{i}", "rare", f"q{i}", 3.0, _dist(3.0), 4.0, (4, 4, 4)) for i in range(8)
    ]
    cal = fit_calibration(data, VALUES, method="isotonic", min_items=30)
    assert "rare" not in cal.criteria and cal.lookup("rare")[0] == POOLED
    assert cal.lookup("never-seen")[0] == POOLED and cal.lookup("overall")[0] == "overall"


def test_calibrated_fields_without_and_with_a_calibration():
    class ReadOut:
        expected, distribution, argmax = 2.5, _dist(2.5), 2

    assert calibrated_fields(None, "overall", ReadOut) == {
        "score": 2.5,
        "distribution": list(_dist(2.5)),
        "argmax": 2,
    }
    cal = Calibration(
        method="isotonic",
        level=0.9,
        scale=VALUES,
        min_items=30,
        criteria={},
        pooled=CriterionCalibration(n_fit=3, n_conformal=3, x=[1.0, 3.0], y=[2.0, 5.0], halfwidth=2.0),
        data=_data(),
    )
    out = calibrated_fields(cal, "overall", ReadOut)
    # The calibrated view (distribution, its mean and argmax, the interval) and the read-out under raw_ names.
    assert out["score"] == 4.25 and out["interval"] == [2.25, 6.0]  # clipped at the top
    assert float(np.dot(out["distribution"], VALUES)) == pytest.approx(4.25, abs=1e-9)
    assert out["argmax"] == int(np.argmax(out["distribution"])) == 4
    assert out["raw_score"] == 2.5 and out["raw_distribution"] == list(_dist(2.5)) and out["raw_argmax"] == 2


def _data():
    from judge.models.calibration import CalibrationData

    return CalibrationData(
        fingerprint="f" * 64,
        human_files=[],
        n_items=3,
        n_questions=2,
        ids=["a"],
        conformal_fraction=0.5,
        seed=0,
    )


def test_a_bad_calibration_file_is_an_error_naming_file_and_field(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"method": "isotonic", "level": 1.5}))
    with pytest.raises(ConfigError, match=r"calibration.json: not a calibration file:\n.*level"):
        read_calibration(path)
    bad_knots = {"n_fit": 1, "n_conformal": 1, "x": [2.0, 1.0], "y": [1.0, 2.0], "halfwidth": None}
    with pytest.raises(ValueError, match="strictly increasing"):
        CriterionCalibration.model_validate(bad_knots)


def test_the_card_names_the_calibration_and_a_changed_file_is_refused(tmp_path, rubric):
    from judge.models.card import CardCalibration, card_calibration, read_card, write_card

    cal = fit_calibration(synthetic(40, 8), VALUES, min_items=30)
    folder = tmp_path / "judge"
    folder.mkdir()
    card_json = {"base_model": "tiny", "rubric": {"name": "mmie", "hash": rubric.hash}}
    (folder / "judge_card.json").write_text(json.dumps(card_json))
    card = read_card(folder)
    assert card_calibration(folder, card) is None  # the card names none: the raw read-out
    write_calibration(folder, cal)
    card.calibration = CardCalibration(
        file="calibration.json", fingerprint=cal.fingerprint(), method=cal.method, level=cal.level,
        data_fingerprint=cal.data.fingerprint, human_files=[], n_items=cal.data.n_items,
    )  # fmt: skip
    write_card(folder, card)
    again = card_calibration(folder, read_card(folder))
    assert again is not None and again.fingerprint() == cal.fingerprint() and again == cal
    edited = json.loads((folder / "calibration.json").read_text())
    edited["level"] = 0.5
    (folder / "calibration.json").write_text(json.dumps(edited))
    with pytest.raises(ConfigError, match="not the calibration the judge card names"):
        card_calibration(folder, read_card(folder))
    (folder / "calibration.json").unlink()
    with pytest.raises(ConfigError, match="the file is missing"):
        card_calibration(folder, read_card(folder))


def test_fit_settings_are_checked():
    data = synthetic(10, 9)
    with pytest.raises(Exception, match="`level`"):
        fit_calibration(data, VALUES, level=1.0)
    with pytest.raises(Exception, match="not one of auto, isotonic, temperature, none"):
        fit_calibration(data, VALUES, method="platt")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="at least 2 questions"):
        fit_calibration(data[:2], VALUES)
    assert math.isfinite(fit_calibration(data, VALUES, min_items=2).pooled.halfwidth or 0.0)


def two_noises(n_questions: int, seed: int):
    """One judge, two criteria: ``overall`` close to the humans, ``text_quality`` far noisier."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for r in range(3):
            for crit, noise in (("overall", 0.3), ("text_quality", 1.4)):
                human = float(rng.uniform(0.5, 5.5))
                d = _dist(float(np.clip(human + rng.normal(0, noise), 0, 6)))
                out.append(LabelledScore(f"q{q}-r{r}", crit, f"q{q}", float(np.dot(d, VALUES)), d, human,
                                         (round(human),) * 3))  # fmt: skip
    return out


def test_each_criterion_with_enough_held_out_items_gets_its_own_interval_and_its_own_coverage():
    # min_items 10,000: no criterion has its own map, but each has enough held-out items for its own interval.
    cal = fit_calibration(two_noises(100, 1), VALUES, method="isotonic", min_items=10_000, min_conformal=20)
    ov, tq = cal.criteria["overall"], cal.criteria["text_quality"]
    assert ov.map_from == POOLED == tq.map_from and ov.x == cal.pooled.x  # the pooled map, own intervals
    assert tq.halfwidth > 2 * ov.halfwidth
    fresh = two_noises(600, 2)
    for crit in ("overall", "text_quality"):
        items = [s for s in fresh if s.criterion == crit]
        views = [cal.apply(crit, s.raw, s.distribution) for s in items]
        covered = np.mean(
            [v.interval[0] <= s.human <= v.interval[1] for v, s in zip(views, items, strict=True)]
        )
        assert 0.87 <= covered <= 0.94, (crit, covered)
    # One pooled interval would have covered the noisy criterion far less than promised.
    pooled = cal.pooled.halfwidth
    tq_items = [s for s in fresh if s.criterion == "text_quality"]
    assert (
        np.mean([abs(s.human - cal.apply("x", s.raw, s.distribution).score) <= pooled for s in tq_items])
        < 0.85
    )
    groups = cal.comparison["conformal"]
    n = groups["overall"]["n"]
    assert groups["overall"]["coverage_bounds"] == pytest.approx([0.9, 0.9 + 1 / (n + 1)])


def test_nll_brier_and_ece_against_independent_computations():
    from sklearn.metrics import log_loss

    from judge.eval.calibration_metrics import distribution_metrics, reliability_points

    rng = np.random.default_rng(4)
    dists = [_dist(rng.uniform(0, 6), rng.uniform(0.8, 2.0)) for _ in range(300)]
    ratings = [tuple(int(v) for v in rng.integers(0, 7, 3)) for _ in dists]  # three annotators each
    human = [float(np.mean(r)) for r in ratings]
    expected = [float(np.dot(d, VALUES)) for d in dists]
    got = distribution_metrics(dists, expected, ratings, human, VALUES)
    rows = [(d, r) for d, rs in zip(dists, ratings, strict=True) for r in rs]  # every item has 3 ratings
    assert got["nll"] == pytest.approx(log_loss([r for _, r in rows], [d for d, _ in rows], labels=VALUES))
    brier = np.mean([np.sum((np.asarray(d) - np.eye(7)[r]) ** 2) for d, r in rows])
    assert got["brier"] == pytest.approx(brier)
    assert got["mae"] == pytest.approx(np.mean(np.abs(np.subtract(expected, human))))
    # Top-label ECE by a plain loop over ten confidence bins.
    conf = np.asarray([max(d) for d in dists])
    acc = np.asarray(
        [np.mean([r == int(np.argmax(d)) for r in rs]) for d, rs in zip(dists, ratings, strict=True)]
    )
    ece = 0.0
    for b in range(10):
        sel = (conf >= b / 10) & ((conf < (b + 1) / 10) | (b == 9))
        if sel.any():
            ece += sel.mean() * abs(acc[sel].mean() - conf[sel].mean())
    assert got["ece_top"] == pytest.approx(ece)
    ece_s = 0.0
    e, h = np.asarray(expected), np.asarray(human)
    for v in VALUES:
        sel = np.clip(np.floor(e + 0.5), 0, 6) == v
        if sel.any():
            ece_s += sel.mean() * abs(h[sel].mean() - e[sel].mean())
    assert got["ece_score"] == pytest.approx(ece_s)
    assert sum(n for _, _, n in reliability_points(dists, ratings, VALUES)) == 300
    # Bootstrap weights: each row is the measure of the expanded sample.
    w = rng.integers(0, 3, (4, 300)).astype(float)
    reps = distribution_metrics(dists, expected, ratings, human, VALUES, weights=w)
    for b in range(4):
        k = w[b].astype(int)
        exp = [i for i in range(300) for _ in range(k[i])]
        one = distribution_metrics([dists[i] for i in exp], [expected[i] for i in exp], [ratings[i] for i in exp],
                                   [human[i] for i in exp], VALUES)  # fmt: skip
        for m in ("nll", "brier", "ece_top", "ece_score", "mae"):
            assert reps[m][b] == pytest.approx(one[m])
