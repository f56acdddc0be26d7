"""``judge-calibrate --selective --plan``: how many labelled items a promise needs at the judge's observed
agreement, and what the output says when no threshold passed (issue 38)."""

from __future__ import annotations

import math

import pytest
from test_selective import VALUES, judged

from judge.cli.calibrate import main as calibrate_main
from judge.eval.calibration import conformal_part, fit_calibration
from judge.eval.selective import fit_selective, format_plan, format_selective, plan_size
from judge.models.calibration import POOLED
from judge.models.selective import Selective, SelectiveRule
from judge.scoring.summary import render_markdown


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k) by summing terms (log-space: n reaches hundreds)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    return sum(
        math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
        for i in range(k + 1)
    )


def power_by_hand(n: int, observed: float, alpha: float, delta: float) -> float:
    """The chance that the exact test certifies on n items when the true agreement is ``observed``."""
    k = -1
    while k + 1 <= n and _binom_cdf(k + 1, n, alpha) <= delta:
        k += 1
    return _binom_cdf(k, n, 1 - observed)


def needed_by_hand(observed: float, agreement: float, delta: float, power: float = 0.8) -> int | None:
    """The smallest n (from the fit's least testable set, 30 or more) at which, and at every larger n up to
    2 n + 200, the exact binomial test certifies with probability >= power when the true agreement is the
    observed one. (Issue 38's review: the earlier rule, the first n whose test passes at exactly the observed
    rate, certified in 45 to 67% of draws and failed again at larger n; that rule was the defect.)"""
    alpha = 1 - agreement
    if observed <= agreement:
        return None
    n = 30
    while (1 - alpha) ** n > delta:
        n += 1
    powers: dict[int, float] = {}

    def pw(m: int) -> float:
        if m not in powers:
            powers[m] = power_by_hand(m, observed, alpha, delta)
        return powers[m]

    while n < 5_000:
        if all(pw(m) >= power for m in range(n, 2 * n + 201)):
            return n
        n = next(m for m in range(n, 2 * n + 201) if pw(m) < power) + 1
    return None


@pytest.mark.parametrize(
    ("observed", "agreement", "delta"),
    [
        (0.75, 0.6, 0.1),
        (0.7, 0.6, 0.1),
        (0.8, 0.6, 0.1),
        (0.85, 0.8, 0.05),
        (0.6, 0.6, 0.1),
        (0.5, 0.6, 0.1),
    ],
)
def test_the_plans_number_is_the_smallest_n_the_binomial_test_certifies_with_the_power(
    observed, agreement, delta
):
    assert plan_size(observed, 1 - agreement, delta) == needed_by_hand(observed, agreement, delta)


def test_the_plan_of_a_fit_uses_the_agreement_it_observed_on_the_held_out_items():
    data = judged(40, 3)
    cal = fit_calibration(data, VALUES, min_items=30)
    sel = fit_selective(data, cal, agreement=0.6, delta=0.1, tolerance=1.0)
    plan = sel.fitted_on["plan"]
    part = conformal_part(cal, data)
    for crit in ("overall", "text_quality"):
        ok = [abs(cal.apply(crit, s.raw, s.distribution).score - s.human) <= 1.0 + 1e-9
              for s in part if s.criterion == crit]  # fmt: skip
        p = plan["pointwise"][crit]
        assert p["n"] == len(ok) and p["observed_agreement"] == pytest.approx(sum(ok) / len(ok))
        assert p["needed"] == needed_by_hand(sum(ok) / len(ok), 0.6, 0.1)
    text = format_plan(sel)
    assert "smallest n" in text and "delta" in text  # the method is stated
    need = plan["pointwise"]["overall"]["needed"]
    if need is not None:
        assert str(need) in text and str(math.ceil(need / cal.data.conformal_fraction)) in text


def _no_threshold() -> Selective:
    rule = SelectiveRule(threshold=None, n=36, n_trusted=0, agreement=None, p_value=None)
    return Selective(agreement=0.6, delta=0.1, tolerance=1.0, confidence="mass", scale=VALUES, calibration="c" * 64,
                     pointwise={POOLED: rule}, pairwise={}, fitted_on={"items": 36}, created="now")  # fmt: skip


def test_when_no_threshold_passes_the_output_says_so_and_what_to_do():
    text = format_selective(_no_threshold())
    assert (
        "No pointwise threshold passed" in text
        and "--plan" in text
        and "every such score is escalated" in text
    )
    summary = {
        "counts": {"records": 10, "by_metric": {"judge": 10}, "unscorable": 0, "trusted": 0, "escalated": 10}
    }
    md = render_markdown(summary)
    assert "no threshold passed" in md and "--plan" in md
    assert "(the judge's confidence below its threshold" not in md  # the old wording, where none exists


def test_a_fit_that_trusts_nothing_says_how_many_labels_its_promise_needs():
    # Where no threshold passes, the fit's own output (and the demo's verdict block) gives the plan's number,
    # so the user sees what a promise would take without a second command.
    from judge.view.verdict import RunFiles, selective_verdict

    data = judged(40, 3)
    cal = fit_calibration(data, VALUES, min_items=30)
    sel = fit_selective(data, cal, agreement=0.97, delta=0.01, tolerance=1.0)
    none = {k: r for k, r in sel.pointwise.items() if r.threshold is None}
    assert none, "the synthetic judge must miss a 97% promise for this test to mean anything"
    text = format_selective(sel)
    for key in none:
        p = sel.fitted_on["plan"]["pointwise"][key]
        line = next(x for x in text.splitlines() if x.strip().startswith(f"{key}:"))
        assert f"{p['observed_agreement']:.1%} on {p['n']} held-out items" in line
        if p["needed"] is None:
            assert "more labels at this agreement cannot certify it" in line
        else:
            assert f"needs about {p['needed']} held-out items" in line
    files = RunFiles(selective=sel.model_dump(mode="json"))
    verdict = selective_verdict(files, None)
    assert verdict is not None
    details = " ".join(verdict.details)
    key = "overall" if "overall" in sel.pointwise else POOLED
    if sel.pointwise[key].threshold is None:
        p = sel.fitted_on["plan"]["pointwise"][key]
        assert f"{p['observed_agreement']:.1%} on {p['n']} held-out items" in details


def test_plan_without_selective_is_refused_naming_the_flag(tmp_path, capsys):
    assert calibrate_main(["--judge", str(tmp_path), "--plan"]) == 2
    err = capsys.readouterr().err
    assert "--plan" in err and "--selective" in err and "Traceback" not in err
