import math

import krippendorff
import numpy as np
import pytest
from scipy.stats import spearmanr

from judge.core.schema import AnnotationRecord
from judge.data.aggregate import (
    aggregate_record,
    aggregate_values,
    agreement,
    krippendorff_alpha,
    mean_pairwise_spearman,
    reliability_matrix,
)


def rec(i, scores):
    return AnnotationRecord(id=f"r{i}", task="SA", question="q", response="r", scores=scores)


def test_aggregation_methods():
    assert aggregate_values([1, 2, 6], "mean") == 3.0
    assert aggregate_values([1, 2, 6], "median") == 2.0
    assert aggregate_values([4, 4, 1], "majority") == 4.0
    # 2 and 5 tie on count; the mean is 4, and 5 is closer to it
    assert aggregate_values([2, 2, 5, 6, 5], "majority") == 5.0
    assert aggregate_values([1, 3], "majority") == 1.0  # equal distance to the mean: the lower
    with pytest.raises(ValueError):
        aggregate_values([1], "mode")


def test_aggregate_record_spread():
    agg = aggregate_record(rec(0, {"a": {"overall": 2, "innovation": 5}, "b": {"overall": 4}}))
    assert agg["overall"].value == 3.0 and agg["overall"].spread == 1.0 and agg["overall"].n == 2
    assert agg["innovation"].value == 5.0 and agg["innovation"].spread == 0.0


def test_interval_alpha_hand_computed():
    # Two annotators, three items: (1,2), (3,3), (5,4); n = 6 pairable values.
    #   D_o = 1/n * sum_u 1/(m_u-1) * sum_{i!=j in u} (v_i - v_j)^2 = (2 + 0 + 2) / 6 = 2/3
    #   D_e = 1/(n(n-1)) * sum_{i!=j} (v_i - v_j)^2 = 2n * sum (v - mean)^2 / 30 = 12 * 10 / 30 = 4
    #   alpha = 1 - D_o / D_e = 1 - 1/6 = 5/6
    values = [1, 2, 3, 3, 5, 4]
    pair_sum = sum((a - b) ** 2 for a in values for b in values)
    d_e = pair_sum / (6 * 5)
    d_o = (2 + 0 + 2) / 6
    expected = 1 - d_o / d_e
    records = [
        rec(0, {"a": {"overall": 1}, "b": {"overall": 2}}),
        rec(1, {"a": {"overall": 3}, "b": {"overall": 3}}),
        rec(2, {"a": {"overall": 5}, "b": {"overall": 4}}),
    ]
    _, mat = reliability_matrix(records, "overall")
    ours = krippendorff_alpha(mat, "interval")
    assert ours == pytest.approx(expected, abs=1e-12)
    assert ours == pytest.approx(krippendorff.alpha(reliability_data=mat, level_of_measurement="interval"))
    assert expected == pytest.approx(5 / 6)


def test_alpha_with_missing_and_ordinal_matches_package():
    mat = np.array([[1, 2, 3, 3, np.nan, 6, 0], [1, 3, 3, 4, 5, np.nan, 1], [np.nan, 2, 4, 4, 5, 6, 0]])
    for level in ("interval", "ordinal"):
        assert krippendorff_alpha(mat, level, range(7)) == pytest.approx(
            krippendorff.alpha(reliability_data=mat, level_of_measurement=level, value_domain=list(range(7)))
        )
    assert math.isnan(krippendorff_alpha(np.array([[1.0, np.nan], [np.nan, 2.0]])))


def test_mean_pairwise_spearman():
    mat = np.array([[1, 2, 3, 4, 5], [2, 1, 4, 3, 5], [5, 4, 3, 2, 1]], dtype=float)
    pairs = [(0, 1), (0, 2), (1, 2)]
    expected = np.mean([spearmanr(mat[i], mat[j]).statistic for i, j in pairs])
    assert mean_pairwise_spearman(mat) == pytest.approx(expected)


def test_agreement_summary():
    records = [
        rec(i, {"a": {"overall": s}, "b": {"overall": min(6, s + d)}})
        for i, (s, d) in enumerate([(0, 0), (2, 1), (4, 0), (6, 0), (3, 1)])
    ]
    a = agreement(records, "overall", range(7))
    assert a.n_items == 5 and a.n_annotators == 2
    assert 0.8 < a.alpha_interval <= 1.0
    assert a.as_dict()["mean_spread"] == pytest.approx(0.2)
