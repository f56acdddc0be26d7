"""Statistics of judge.eval against the libraries they come from, and hand-checked examples."""

import math

import numpy as np
import pytest
from scipy import stats

from judge.data.aggregate import round_half_up
from judge.eval import bootstrap as bs
from judge.eval.bootstrap import ClusterBootstrap, bootstrap_correlations, paired_bootstrap, seeded_rng
from judge.eval.ceiling import alpha, human_ceiling, leave_one_annotator_out
from judge.eval.matching import HumanItem
from judge.eval.stats import (
    correlation_summary,
    error_summary,
    pairwise_ranking_accuracy,
    point_metrics,
    quadratic_kappa,
    within_one,
)


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    n = 90
    latent = rng.uniform(0, 6, n // 3).repeat(3)  # 30 questions of 3 responses, correlated within a question
    human = np.clip(np.round(latent + rng.normal(0, 0.8, n)), 0, 6)
    pred = np.clip(human + rng.normal(0, 1.0, n), 0, 6)
    clusters = [f"q{i // 3}" for i in range(n)]
    return pred, human, clusters


def test_point_statistics_equal_the_libraries(data):
    from sklearn.metrics import cohen_kappa_score, mean_absolute_error, mean_squared_error

    pred, human, clusters = data
    c = correlation_summary(pred, human)
    assert c["pearson"] == pytest.approx(stats.pearsonr(pred, human).statistic, abs=1e-12)
    assert c["spearman"] == pytest.approx(stats.spearmanr(pred, human).statistic, abs=1e-12)
    assert c["kendall"] == pytest.approx(stats.kendalltau(pred, human, variant="b").statistic, abs=1e-12)
    e = error_summary(pred, human)
    assert e["mae"] == pytest.approx(mean_absolute_error(human, pred))
    assert e["mse"] == pytest.approx(mean_squared_error(human, pred))
    assert e["mae"] == pytest.approx(c["mae"]) and e["mse"] == pytest.approx(c["mse"])
    expected_kappa = cohen_kappa_score(
        np.floor(human + 0.5).astype(int),
        np.floor(pred + 0.5).astype(int),
        weights="quadratic",
        labels=list(range(7)),
    )
    assert quadratic_kappa(pred, human, (0, 6)) == pytest.approx(expected_kappa)
    m = point_metrics(pred, human, clusters, scale=(0, 6))
    assert m["qwk"] == pytest.approx(expected_kappa) and m["pearson"] == c["pearson"]
    off = point_metrics(pred, human, clusters, scale=None)  # e.g. CLIPScore: no distances across scales
    assert off["mae"] is off["qwk"] is off["within1"] is None and off["spearman"] == c["spearman"]


def test_rounding_within_one_and_undefined_values():
    assert round_half_up([0.5, 1.5, 2.5, 2.49, -0.5]).tolist() == [1, 2, 3, 2, 0]
    assert within_one([1.0, 2.0, 5.0], [2.0, 3.5, 5.0]) == pytest.approx(2 / 3)
    c = correlation_summary([3.0, 3.0, 3.0], [1.0, 2.0, 4.0])
    assert c["pearson"] is None and c["spearman"] is None and c["kendall"] is None and c["mae"] is not None
    assert quadratic_kappa([3.0], [3.0], (0, 6)) is None
    assert quadratic_kappa([2.0, 2.0], [2.0, 2.0], (0, 6)) is None  # one label only: undefined, not NaN


def test_krippendorff_alpha_equals_the_package():
    import krippendorff

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 7, 40)
    mat = np.clip(truth + rng.integers(-1, 2, (3, 40)), 0, 6).astype(float)
    mat[1, 5] = np.nan
    items = [
        HumanItem(
            f"r{j}",
            "overall",
            f"q{j}",
            "SA",
            "m",
            float(np.nanmean(mat[:, j])),
            tuple((f"a{i}", int(mat[i, j])) for i in range(3) if not np.isnan(mat[i, j])),
        )
        for j in range(40)
    ]
    got = alpha(items, list(range(7)))
    for level in ("interval", "ordinal"):
        want = krippendorff.alpha(
            reliability_data=mat, level_of_measurement=level, value_domain=list(range(7))
        )
        assert got[f"alpha_{level}"] == pytest.approx(want)


@pytest.mark.parametrize("small_matrix_limit", [False, True])
def test_bootstrap_replicates_equal_scipy_on_the_expanded_resample(data, monkeypatch, small_matrix_limit):
    if small_matrix_limit:  # the scipy path used for many items
        monkeypatch.setattr(bs, "KENDALL_MATRIX_MAX", 10)
    pred, human, clusters = data
    plan = ClusterBootstrap(clusters, 40, seeded_rng(0, "test"))
    w = plan.weights(clusters)
    reps = bs.replicates(pred, human, w)
    for b in range(40):
        k = w[b].astype(int)
        xe, ye = np.repeat(pred, k), np.repeat(human, k)
        assert reps["pearson"][b] == pytest.approx(stats.pearsonr(xe, ye).statistic, abs=1e-10)
        assert reps["spearman"][b] == pytest.approx(stats.spearmanr(xe, ye).statistic, abs=1e-10)
        assert reps["kendall"][b] == pytest.approx(stats.kendalltau(xe, ye, variant="b").statistic, abs=1e-10)


def test_a_constant_resample_is_undefined_not_a_number():
    w = np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    for f in (bs.weighted_pearson, bs.weighted_spearman, bs.weighted_kendall):
        r = f(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0]), w)
        assert math.isnan(r[0]) and not math.isnan(r[1])


def test_bootstrap_resamples_questions_so_their_responses_move_together(data):
    pred, human, clusters = data
    plan = ClusterBootstrap(clusters, 300, seeded_rng(0, "slice"))
    w = plan.weights(clusters)
    for q in range(30):  # the three responses of a question always carry the same weight
        assert (w[:, 3 * q] == w[:, 3 * q + 1]).all() and (w[:, 3 * q] == w[:, 3 * q + 2]).all()
    assert (w.sum(axis=1) == 90).all()  # 30 questions drawn, 3 responses each
    base = bootstrap_correlations(pred, human, clusters, plan)

    # Every response duplicated within its question: same questions, same draws, same statistics.
    dup_clusters = [c for c in clusters for _ in range(2)]
    plan2 = ClusterBootstrap(dup_clusters, 300, seeded_rng(0, "slice"))
    dup = bootstrap_correlations(np.repeat(pred, 2), np.repeat(human, 2), dup_clusters, plan2)
    for s in ("pearson", "spearman", "kendall"):
        assert dup[s]["value"] == pytest.approx(base[s]["value"], abs=1e-12)
        assert dup[s]["ci"] == pytest.approx(base[s]["ci"], abs=1e-12)
        lo, hi = base[s]["ci"]
        assert lo < base[s]["value"] < hi


def test_pairwise_ranking_accuracy_hand_checked():
    # q1: pairs (0,1) agree, (0,2) disagree, (1,2) tied by humans (left out); q2: a scorer tie (half);
    # q3: one response, no pair.
    pred = [2, 5, 1, 3, 3, 4]
    human = [1, 3, 3, 2, 4, 0]
    groups = ["q1", "q1", "q1", "q2", "q2", "q3"]
    r = pairwise_ranking_accuracy(pred, human, groups)
    assert r == {"accuracy": pytest.approx(1.5 / 3), "n_pairs": 3, "n_scorer_ties": 1, "n_human_ties": 1}
    assert pairwise_ranking_accuracy([1, 2], [3, 3], ["q", "q"])["accuracy"] is None


def _items(ratings_by_annotator: dict[str, list[int]]) -> list[HumanItem]:
    n = len(next(iter(ratings_by_annotator.values())))
    out = []
    for j in range(n):
        r = tuple(sorted((a, v[j]) for a, v in ratings_by_annotator.items()))
        out.append(HumanItem(f"r{j}", "overall", f"q{j}", "SA", "m", float(np.mean([v for _, v in r])), r))
    return out


def test_leave_one_annotator_out_hand_checked():
    items = _items({"A": [1, 2, 3, 4], "B": [2, 2, 4, 4], "C": [1, 3, 3, 5]})
    res = leave_one_annotator_out(items)
    # A vs mean(B, C) = [1.5, 2.5, 3.5, 4.5]: r = 1. B vs mean(A, C) = [1, 2.5, 3, 4.5]: r = 4 / sqrt(4 * 6.25)
    # = 0.8. C vs mean(A, B) = [1.5, 2, 3.5, 4]: r = 5 / sqrt(8 * 4.25) = 5 / sqrt(34).
    assert res["per_annotator"]["A"]["pearson"] == pytest.approx(1.0)
    assert res["per_annotator"]["B"]["pearson"] == pytest.approx(0.8)
    assert res["per_annotator"]["C"]["pearson"] == pytest.approx(5 / math.sqrt(34))
    assert res["pearson"]["value"] == pytest.approx((1.0 + 0.8 + 5 / math.sqrt(34)) / 3)
    assert res["n_annotators"] == 3 and res["per_annotator"]["A"]["n"] == 4


def test_ceiling_with_intervals_and_single_annotators():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 7, 60)
    items = _items({a: list(np.clip(truth + rng.integers(-1, 2, 60), 0, 6)) for a in ("A", "B", "C")})
    plan = ClusterBootstrap([it.question_id for it in items], 200, seeded_rng(0))
    c = human_ceiling(items, plan, list(range(7)))
    lo, hi = c["loao"]["pearson"]["ci"]
    assert lo < c["loao"]["pearson"]["value"] < hi and c["alpha_interval"] > 0.5
    single = [
        HumanItem(it.id, it.criterion, it.question_id, it.task, it.model, it.value, it.ratings[:1])
        for it in items
    ]
    c1 = human_ceiling(single, plan, list(range(7)))
    assert (
        c1["n_items_multi"] == 0 and c1["loao"]["pearson"]["value"] is None and c1["alpha_interval"] is None
    )


def test_paired_bootstrap_finds_the_clearly_better_scorer(data):
    pred, human, clusters = data
    rng = np.random.default_rng(5)
    good = human + rng.normal(0, 0.3, human.size)
    bad = human + rng.normal(0, 3.0, human.size)
    plan = ClusterBootstrap(clusters, 500, seeded_rng(0, "pair"))
    res = paired_bootstrap(good, bad, human, clusters, plan)
    for s in ("pearson", "spearman", "kendall"):
        r = res[s]
        assert r["diff"] == pytest.approx(r["a"] - r["b"]) and r["diff"] > 0.2
        assert r["ci"][0] > 0 and r["p"] < 0.01
    flipped = paired_bootstrap(bad, good, human, clusters, plan)
    assert flipped["pearson"]["diff"] == pytest.approx(-res["pearson"]["diff"])
    assert flipped["pearson"]["ci"][1] < 0 and flipped["pearson"]["p"] == pytest.approx(res["pearson"]["p"])
    same = paired_bootstrap(good, good, human, clusters, plan)
    assert same["pearson"]["diff"] == 0 and same["pearson"]["p"] == 1.0


def test_bootstrap_p_value_definition():
    assert bs.bootstrap_p_value(np.array([0.1] * 99)) == pytest.approx(2 / 100)  # no resample at or below 0
    assert bs.bootstrap_p_value(np.array([-1.0] * 10 + [1.0] * 90)) == pytest.approx(2 * 11 / 101)
    assert bs.bootstrap_p_value(np.array([np.nan])) is None
    assert bs.percentile_interval(np.array([np.nan] * 6 + [1.0] * 4)) is None  # most resamples undefined
