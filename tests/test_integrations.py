"""The judge as a reward where RL trainers use one: ``judge.reward_function`` in a real TRL GRPOTrainer (two
steps on the CPU, a tiny policy built here), over a local judge and over a server; verl's
``compute_score`` loaded by verl's own loader. The rewards equal the judge's scores of the same items."""

from __future__ import annotations

import math
import shutil

import httpx
import pytest
from PIL import Image
from serving import REPO, running_server

from judge import Judge, reward_function

DEMO = REPO / "annotations" / "demo"
PROMPTS = [
    "Continue the story: three orange squares sat in the quiet garden.",
    "Explain how to fold a paper boat, step by step.",
]


@pytest.fixture(scope="module")
def judge():
    return Judge.load("tiny", rubric="mmie")


def tiny_policy(tokenizer):
    """A seeded tiny Qwen2 causal LM over the tiny judge's tokenizer: a policy GRPO can train on the CPU."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    return Qwen2ForCausalLM(cfg)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(["--judge", "tiny", "--rubric", "mmie"], tmp_path_factory.mktemp("log")) as s:
        yield s


def v1_scores(server, items: list[dict], criterion: str = "overall") -> list[float]:
    r = httpx.post(server.url + "/v1/score", json={"items": items, "criteria": [criterion]}, timeout=60)
    assert r.status_code == 200, r.text
    return [x["scores"][criterion]["score"] for x in r.json()["results"]]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", "server"])
def test_grpo_trainer_logs_the_judges_scores_as_rewards(judge, server, tmp_path, where, capsys):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = judge.engine.processor.tokenizer
    if where == "local":
        reward = reward_function(judge, criterion="overall", task="SA")
    else:
        reward = reward_function(server=server.url, criterion="overall", task="SA")
    seen: list[tuple[list, list, list]] = []

    def recorded(prompts, completions, **kwargs):
        out = reward(prompts, completions, **kwargs)
        seen.append((list(prompts), list(completions), out))
        return out

    recorded.__name__ = reward.__name__
    assert recorded.__name__ == "judge_overall"
    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=8, logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
        learning_rate=1e-4, seed=0, bf16=False, dataloader_num_workers=0,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=tiny_policy(tokenizer), reward_funcs=[recorded], args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS * 4}), processing_class=tokenizer,
    )  # fmt: skip
    trainer.train()
    key = "rewards/judge_overall/mean"
    logged = [h[key] for h in trainer.state.log_history if key in h]
    assert len(logged) == 2 and len(seen) == 2
    for step, ((prompts, completions, rewards), mean) in enumerate(zip(seen, logged, strict=True), start=1):
        # The same items scored by the judge itself (/v1/score for a server): the rewards are those scores.
        items = [
            {"id": str(i), "task": "SA", "question": p, "response": c}
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
        want = (
            [x.score for x in judge.score(items, criteria="overall")]
            if where == "local"
            else v1_scores(server, items)
        )
        assert rewards == pytest.approx(want, abs=1e-4)
        assert mean == pytest.approx(sum(rewards) / len(rewards), abs=1e-5)
        with capsys.disabled():
            shown = ", ".join(f"{r:.4f}" for r in rewards)
            print(
                f"\nGRPO {where} step {step}: logged mean {mean:.4f}; rewards [{shown}]; judge [{', '.join(f'{w:.4f}' for w in want)}]"
            )


def test_conversational_prompts_with_images_and_unit_scale(judge, tmp_path):
    """What a VLM GRPO run passes: conversations whose user turn holds an image part, the images (PIL)
    in the ``images`` column, and a ``reference`` column."""
    src = DEMO / "images" / "msr-000-q0.png"
    pil = Image.open(src).convert("RGB")
    shutil.copy(src, tmp_path / "q.png")
    prompts = [
        [
            {"role": "system", "content": "Be exact."},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "How many squares?"}]},
        ]
    ]
    completions = [[{"role": "assistant", "content": "There are 4 squares."}]]
    reward = reward_function(judge, criterion="final_answer_accuracy", task="MSR", scale="unit")
    (got,) = reward(prompts, completions, images=[[pil]], reference=["4"])
    item = {"id": "x", "task": "MSR", "question": [{"type": "image", "image": "q.png"}, {"type": "text", "text": "How many squares?"}],
            "response": "There are 4 squares.", "reference": "4"}  # fmt: skip
    (want,) = judge.score_records([item], criteria="final_answer_accuracy", root=tmp_path)
    assert got == pytest.approx(want.score / 6, abs=1e-4)


def test_reward_function_over_a_server_gives_v1_scores(server):
    reward = reward_function(server=server.url, task="PBL", criterion="overall")
    got = reward(PROMPTS, ["Fold it in half.", ""])
    items = [
        {"id": str(i), "task": "PBL", "question": p, "response": c}
        for i, (p, c) in enumerate(zip(PROMPTS, ["Fold it in half.", ""], strict=True))
    ]
    assert got == pytest.approx(v1_scores(server, items), abs=1e-4)


def test_verl_loads_compute_score_and_it_gives_v1_scores(server, monkeypatch):
    """verl 0.9.1's own loader (verl.trainer.ppo.reward.get_custom_reward_fn) with the path and name a user
    puts in ``reward.custom_reward_function`` (installed by ``tests/requirements-clients.txt``)."""
    pytest.importorskip(
        "verl",
        reason="verl is not installed (pip install --no-deps --target .clients -r tests/requirements-clients.txt)",
    )
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    import judge.integrations.verl as module

    for key, value in {
        "JUDGE_SERVER_URL": server.url,
        "JUDGE_TASK": "MSR",
        "JUDGE_CRITERION": "overall",
    }.items():
        monkeypatch.setenv(key, value)
    config = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": module.__file__,
                    "name": "compute_score",
                    "reward_kwargs": {},
                }
            }
        }
    )
    fn = get_custom_reward_fn(config)
    got = fn(data_source="gsm8k", solution_str="The total is 8.<|im_end|>", ground_truth="8",
             extra_info={"question": "What is 3 + 5?", "index": 0})  # fmt: skip
    item = {
        "id": "x",
        "task": "MSR",
        "question": "What is 3 + 5?",
        "response": "The total is 8.",
        "reference": "8",
    }
    r = httpx.post(server.url + "/v1/score", json={"items": [item], "criteria": ["overall"]}, timeout=60)
    assert isinstance(got, float) and math.isclose(
        got, r.json()["results"][0]["scores"]["overall"]["score"], abs_tol=1e-4
    )
    monkeypatch.setenv("JUDGE_REWARD_FALLBACK", "-1")
    # A response the judge cannot score (over the tiny judge's 8,192-token context) gets the fallback.
    fn = get_custom_reward_fn(config)
    assert (
        fn(data_source="x", solution_str="garden " * 9000, ground_truth="8", extra_info={"question": "q"})
        == -1.0
    )


def test_verl_errors_and_warnings_name_what_a_verl_user_sets(server, monkeypatch, capsys):
    """A verl user configures the reward with environment variables: an error names JUDGE_TASK, not the
    keyword argument; a dataset without extra_info["question"] is warned about (once), not scored silently
    against an empty question."""
    from judge.core.errors import ConfigError
    from judge.integrations import verl

    monkeypatch.setenv("JUDGE_SERVER_URL", server.url)
    monkeypatch.delenv("JUDGE_TASK", raising=False)
    with pytest.raises(ConfigError) as e:
        verl.compute_score("gsm8k", "8", "8", {"question": "What is 3 + 5?"})
    assert "JUDGE_TASK" in str(e.value) and "`task`" not in str(e.value)
    assert "SA, PBL, MSR" in str(e.value)
    monkeypatch.setenv("JUDGE_TASK", "MSR")
    capsys.readouterr()
    verl.compute_score("gsm8k", "The total is 8.", "8", {"index": 3})
    verl.compute_score("gsm8k", "The total is 9.", "8", {"index": 4})
    err = capsys.readouterr().err
    assert err.count("extra_info has no 'question'") == 1 and "keys given: index" in err
    verl.compute_score("gsm8k", "The total is 8.", "8", {"question": "What is 3 + 5?"})
    assert "extra_info" not in capsys.readouterr().err
