"""judge-serve on a judge of another family than InternVL: ``--judge tiny-qwen2.5-vl``, ``tiny-qwen3-vl``,
``tiny-llava-onevision``, ``tiny-smolvlm`` and ``tiny-gemma3`` on loopback, one server per family for every
check. ``/v1/score`` gives what the engine of ``judge.models.load("tiny-qwen2.5-vl")`` gives for an item
with an image; the chat route answers the judge's own prompt with that score and generates, for any other
conversation with an image, what the model's own ``generate`` writes on the processor's output (greedy, its
own M-RoPE or anyres image inputs); the reward route gives /v1/score's score."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pytest
import torch
from serving import REPO, running_server
from test_serve_reward import QUESTION, RESPONSE, TEMPLATES, openrlhf_post

from judge.models.families import image_token_types
from judge.serve.judge_prompt import judge_chat_messages

#: the tiny judge of each family, its config's model_type, and the fixture of its (model, processor)
FAMILIES = {
    "tiny-qwen2.5-vl": ("qwen2_5_vl", "tiny_qwen"),
    "tiny-qwen3-vl": ("qwen3_vl", "tiny_qwen3"),
    "tiny-smolvlm": ("smolvlm", "tiny_smol"),
    "tiny-gemma3": ("gemma3", "tiny_gemma3"),
    "tiny-llava-onevision": ("llava_onevision", "tiny_llava_onevision"),
}
DEMO = REPO / "annotations" / "demo"
ITEM_FIELDS = ("id", "task", "question", "response", "reference", "model")
TOL = 1e-4

pytestmark = pytest.mark.usefixtures("one_thread")


def demo_item(task: str) -> dict:
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["task"] == task:
            return {k: rec[k] for k in ITEM_FIELDS if k in rec}
    raise AssertionError(f"no demo item of task {task}")


@pytest.fixture(scope="module", params=list(FAMILIES))
def server(request, tmp_path_factory):
    args = ["--judge", request.param, "--rubric", "mmie", "--image-root", str(DEMO)]
    # --chat generate: one test here is the model's own generation for a conversation it does not score.
    with running_server(
        [*args, "--reward-task", "SA", "--chat", "generate"], tmp_path_factory.mktemp("log")
    ) as s:
        s.judge = request.param
        yield s


def post(server, path: str, body: dict) -> dict:
    r = httpx.post(server.url + path, json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_v1_score_is_the_loaded_judges_engine_and_the_chat_route_reads_the_same(server, tmp_path):
    import judge.models
    from judge.scoring.engine import JudgeEngine
    from judge.scoring.inputs import load_inputs

    item = demo_item("SA")
    assert any(p.get("type") == "image" for p in item["question"] + item["response"] if isinstance(p, dict))
    got = post(server, "/v1/score", {"items": [item]})["results"][0]["scores"]
    path = tmp_path / "item.jsonl"
    path.write_text(json.dumps({**item, "benchmark": "mmie"}) + "\n")
    loaded = judge.models.load(server.judge, "mmie", progress=False)
    assert loaded.family == FAMILIES[server.judge][0]
    records = JudgeEngine.for_judge(loaded).score_records(load_inputs([path], root=DEMO).records)
    assert {r.criterion for r in records} == set(got) and len(got) > 1
    for r in records:
        assert r.score is not None and abs(got[r.criterion]["score"] - r.score) < TOL, r.criterion

    # The judge's own prompt on the chat route: read, not generated, and /v1/score's score.
    criterion = records[0].criterion
    messages = judge_chat_messages("mmie", item, criterion, root=DEMO)
    assert any(p["type"] == "image_url" for p in messages[0]["content"])
    body = post(
        server, "/v1/chat/completions", {"model": server.judge, "messages": messages, "max_tokens": 4}
    )
    judged = body["judge"]
    assert judged["criterion"] == criterion and abs(judged["expected"] - got[criterion]["score"]) < TOL
    assert int(body["choices"][0]["message"]["content"]) == judged["argmax"]


def test_a_conversation_with_an_image_is_the_models_own_greedy_generation(server, request):
    """Generated with the family's image inputs (grid, token types): what ``generate`` on the processor's full
    output writes, and the image reached the model (its merged patches are prompt tokens)."""
    from PIL import Image

    # the server's judge: the same seeded tiny model
    model, processor = request.getfixturevalue(FAMILIES[server.judge][1])
    image = DEMO / "images" / "sa-000-q0.png"
    url = "data:image/png;base64," + base64.b64encode(image.read_bytes()).decode()
    question = "What does the picture show?"
    content = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": question}]
    body = post(
        server,
        "/v1/chat/completions",
        {"model": server.judge, "messages": [{"role": "user", "content": content}], "max_tokens": 8},
    )
    assert body["judge"] is None

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with Image.open(image) as im:
        out = processor(
            text=[text], images=[im.convert("RGB")], return_tensors="pt", add_special_tokens=False
        )
    n = out["input_ids"].shape[1]
    with torch.no_grad():
        gen = model.generate(**out, max_new_tokens=8, do_sample=False)
    new = gen[0, n:].tolist()
    assert body["usage"]["prompt_tokens"] == n and body["usage"]["completion_tokens"] == len(new)
    # the image's tokens are in the prompt (Gemma 3's: its soft tokens, not its <start_of_image> placeholder)
    assert int(image_token_types(processor, out["input_ids"]).sum()) >= 4
    assert body["choices"][0]["message"]["content"] == processor.tokenizer.decode(
        new, skip_special_tokens=True
    )


def test_the_reward_route_gives_v1_scores(server):
    prompt, appended = TEMPLATES["chatml"]
    got = asyncio.run(openrlhf_post(server.url + "/v1/reward", [prompt + appended], [prompt], [None]))
    item = {"id": "x", "task": "SA", "question": QUESTION, "response": RESPONSE}
    want = post(server, "/v1/score", {"items": [item], "criteria": ["overall"]})["results"][0]
    assert got["rewards"] == pytest.approx([want["scores"]["overall"]["score"]], abs=TOL)
