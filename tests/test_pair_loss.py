"""The pairwise loss (judge.train.pair_loss): Davidson's Bradley-Terry against a hand computation, the read-out
it trains equal to the scorer's, and the gradient it gives a real tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from judge.core.rubric import OVERALL
from judge.core.template import build_judge_prompt
from judge.train.pair_loss import PREFERRED_CODE, collate_pairs, davidson_nll, expected_scores, pair_loss

pytestmark = pytest.mark.usefixtures("one_thread")


def _hand(sa: float, sb: float, verdict: str, beta: float, nu: float) -> float:
    """-log P(verdict), Davidson (1970) written out: P(A) = e^{bA} / (e^{bA} + e^{bB} + nu sqrt(e^{bA} e^{bB}))."""
    ea, eb = math.exp(beta * sa), math.exp(beta * sb)
    z = ea + eb + nu * math.sqrt(ea * eb)
    p = {"a": ea / z, "b": eb / z, "tie": nu * math.sqrt(ea * eb) / z}[verdict]
    return -math.log(p)


CASES = [
    (3.0, 1.0, "a"),
    (1.0, 2.5, "b"),
    (2.0, 2.0, "tie"),
    (4.5, 0.5, "tie"),
    (0.0, 6.0, "a"),
    (5.0, 5.5, "b"),
]


@pytest.mark.parametrize(("beta", "nu"), [(1.0, 1.0), (2.0, 0.5), (0.5, 3.0)])
def test_davidson_equals_the_hand_computation(beta, nu):
    sa = torch.tensor([c[0] for c in CASES], dtype=torch.float64)
    sb = torch.tensor([c[1] for c in CASES], dtype=torch.float64)
    pref = torch.tensor([PREFERRED_CODE[c[2]] for c in CASES])
    got = davidson_nll(sa, sb, pref, beta=beta, tie_strength=nu)
    want = [_hand(a, b, v, beta, nu) for a, b, v in CASES]
    assert got.tolist() == pytest.approx(want, rel=1e-12)
    # The three outcomes' probabilities sum to one, and a tie is likeliest at equal scores.
    three = davidson_nll(
        sa[:1].repeat(3), sb[:1].repeat(3), torch.tensor([0, 1, 2]), beta=beta, tie_strength=nu
    )
    assert torch.exp(-three).sum().item() == pytest.approx(1.0, rel=1e-12)
    ties = davidson_nll(torch.tensor([2.0, 2.5, 3.0]), torch.tensor([2.0] * 3), torch.tensor([2] * 3))
    assert ties[0] < ties[1] < ties[2]


def test_without_ties_it_is_bradley_terry():
    sa, sb = torch.tensor([3.0, 1.0, -2.0]), torch.tensor([1.0, 2.5, 0.0])
    pref = torch.tensor([0, 1, 0])
    got = davidson_nll(sa, sb, pref, beta=1.5, tie_strength=0.0)
    d = 1.5 * (sa - sb) * torch.tensor([1.0, -1.0, 1.0])
    assert torch.allclose(got, -torch.nn.functional.logsigmoid(d))
    assert math.isinf(davidson_nll(sa[:1], sb[:1], torch.tensor([2]), tie_strength=0.0).item())
    # Stable far from zero: a huge difference for the preferred side is a loss of (about) zero, not NaN.
    far = davidson_nll(torch.tensor([1e4]), torch.tensor([0.0]), torch.tensor([0]))
    assert far.item() == pytest.approx(0.0, abs=1e-6)


def test_expected_score_on_known_logits():
    logits = torch.full((2, 10), -5.0)
    logits[0, [4, 5, 6]] = torch.tensor([1.0, 2.0, 3.0])
    logits[1, [4, 5, 6]] = torch.tensor([0.0, 0.0, 0.0])
    got = expected_scores(logits, [4, 5, 6], [0, 1, 2])
    e = [math.exp(1), math.exp(2), math.exp(3)]
    assert got.tolist() == pytest.approx([(e[1] + 2 * e[2]) / sum(e), 1.0], rel=1e-6)


def _pair_rows(small_demo, rubric, n=2):
    from judge.core.io import load_annotations

    recs = load_annotations(small_demo, rubric=rubric).records[: 2 * n]
    rows = []
    for i in range(n):
        a, b = recs[2 * i], recs[2 * i + 1]
        prompts = [
            build_judge_prompt(rubric, r.task, OVERALL, r.question, r.response, r.reference) for r in (a, b)
        ]
        rows.append(
            {
                "id": f"p{i}",
                "criterion": OVERALL,
                "preferred": ["a", "tie"][i % 2],
                "prompt_a": prompts[0].messages,
                "prompt_b": prompts[1].messages,
                "images_a": [_open(p) for p in prompts[0].images],
                "images_b": [_open(p) for p in prompts[1].images],
            }
        )
    return rows, (a, b)


def _open(path):
    from judge.core.images import open_image

    return open_image(path)


def test_the_pairs_read_out_is_the_scorers(tiny, small_demo, rubric):
    """The expected scores the loss trains are those judge-score reads for the same prompts (same tokens,
    same position), to float round-off."""
    from judge.models.readout import ExpectedScorer, ScoreRequest
    from judge.models.score_tokens import score_token_ids

    model, processor = tiny
    rows, _ = _pair_rows(small_demo, rubric)
    batch = collate_pairs(processor, rows)
    ids = score_token_ids(processor.tokenizer, rubric.scale.values)
    with torch.no_grad():
        loss, sa, sb = pair_loss(model, batch, ids, rubric.scale.values, beta=1.0, tie_strength=1.0)
    scorer = ExpectedScorer(model, processor, rubric.scale.values)
    want = []
    for side in ("a", "b"):
        for r in rows:
            req = ScoreRequest(r["id"], [OVERALL], [r[f"prompt_{side}"]], r[f"images_{side}"])
            ((_, (score,)),) = next(scorer.score([req], share_prefix=False))
            want.append(score.expected)
    assert torch.cat([sa, sb]).tolist() == pytest.approx(want, abs=1e-5)
    pref = batch["preferred"]
    assert loss.item() == pytest.approx(davidson_nll(sa, sb, pref).mean().item(), rel=1e-6)


def test_the_loss_trains_the_model(small_demo, rubric):
    """A real gradient through the read-out: a few SGD steps on one pair raise the preferred side's score."""
    from judge.models import build_tiny_scorer
    from judge.models.score_tokens import score_token_ids

    model, processor = build_tiny_scorer(seed=0)
    model.train()
    rows, _ = _pair_rows(small_demo, rubric, n=1)
    rows[0]["preferred"] = "b"
    batch = collate_pairs(processor, rows)
    ids = score_token_ids(processor.tokenizer, rubric.scale.values)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gaps = []
    for _ in range(4):
        loss, sa, sb = pair_loss(model, batch, ids, rubric.scale.values)
        gaps.append((sb - sa).item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert gaps[-1] > gaps[0]
