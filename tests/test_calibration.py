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
    res = rng.normal(0, 1, 57)
    groups = ["a"] * 40 + ["b"] * 12 + ["c"] * 5
    half = conformal_halfwidths(res, groups, 0.9)
    for g in ("a", "b"):
        r = np.sort(np.abs(res[np.asarray(groups) == g]))[::-1]  # largest first
        n = r.size
        # The ceil((1 - alpha)(n + 1))-th smallest |residual|: index floor(alpha (n + 1)) - 1 from the top.
        assert half[g] == r[int(0.1 * (n + 1) + 1e-9) - 1]
        single = ConformalRegressor().fit(res[np.asarray(groups) == g])
        assert single.predict_int(np.zeros(1), confidence=0.9)[0, 1] == half[g]
    assert half["c"] is None  # 5 residuals cannot give a 90% interval: the whole scale


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


def test_temperature_method_stores_a_temperature_and_applies_it():
    cal = fit_calibration(synthetic(60, 5), VALUES, min_items=30)
    assert cal.method == "temperature"  # the default
    cc = cal.criteria["overall"]
    assert cc.temperature is not None and cc.x is None
    s = synthetic(1, 6)[0]
    assert cal.apply("overall", s.raw, s.distribution).score == pytest.approx(
        tempered_expectation(s.distribution, VALUES, cc.temperature)
    )


def test_criteria_with_few_items_take_the_pooled_calibration():
    data = synthetic(40, 7) + [
        LabelledScore(f"x{i}", "rare", f"q{i}", 3.0, _dist(3.0), 4.0, (4, 4, 4)) for i in range(8)
    ]
    cal = fit_calibration(data, VALUES, method="isotonic", min_items=30)
    assert "rare" not in cal.criteria and cal.lookup("rare")[0] == POOLED
    assert cal.lookup("never-seen")[0] == POOLED and cal.lookup("overall")[0] == "overall"


def test_calibrated_fields_without_and_with_a_calibration():
    class ReadOut:
        expected, distribution = 2.5, _dist(2.5)

    assert calibrated_fields(None, "overall", ReadOut) == {"score": 2.5}
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
    assert out == {"score": 4.25, "raw_score": 2.5, "interval": [2.25, 6.0]}  # clipped at the top


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
    with pytest.raises(Exception, match="not one of isotonic, temperature"):
        fit_calibration(data, VALUES, method="platt")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="at least 2 questions"):
        fit_calibration(data[:2], VALUES)
    assert math.isfinite(fit_calibration(data, VALUES, min_items=2).pooled.halfwidth or 0.0)
