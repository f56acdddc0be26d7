"""The reward route for RL trainers: OpenRLHF's remote reward model protocol at /get_reward and /v1/reward,
sent exactly as OpenRLHF 0.11.2 sends it (``SingleTurnAgentExecutor._fetch_rewards_via_http``: aiohttp,
``{"query", "prompts", "labels"}``, ``raise_for_status``, ``response.json()``) and through OpenRLHF's own
function; rewards equal /v1/score's scores of the items they stand for, whatever the policy's chat
template; an unscorable query gets the fallback and a flag, never fails the batch."""

from __future__ import annotations

import asyncio
import base64
import importlib.util

import aiohttp
import httpx
import pytest
from serving import REPO, running_server

DEMO = REPO / "annotations" / "demo"
QUESTION = "Continue the story: three orange squares sat in the quiet garden."
RESPONSE = "Then the rain came, and the squares turned a darker orange."

#: The same exchange in the chat templates policies use: (templated prompt, what the policy appends).
TEMPLATES = {
    "chatml": (
        "<|im_start|>system\nYou are a storyteller.<|im_end|>\n<|im_start|>user\n"
        f"{QUESTION}<|im_end|>\n<|im_start|>assistant\n",
        f"{RESPONSE}<|im_end|><|endoftext|><|endoftext|>",
    ),
    "llama3": (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a storyteller.<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{QUESTION}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        f"{RESPONSE}<|eot_id|>",
    ),
    "gemma": (
        f"<bos><start_of_turn>user\n{QUESTION}<end_of_turn>\n<start_of_turn>model\n",
        f"{RESPONSE}<end_of_turn><eos>",
    ),
    "plain": (f"{QUESTION}\n", RESPONSE),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--reward-task", "SA", "--image-root", str(DEMO)]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def v1_score(server, items: list[dict], criterion: str = "overall") -> list[float]:
    r = httpx.post(server.url + "/v1/score", json={"items": items, "criteria": [criterion]}, timeout=120)
    assert r.status_code == 200, r.text
    return [x["scores"][criterion]["score"] for x in r.json()["results"]]


async def openrlhf_post(url: str, queries: list, prompts: list, labels: list) -> dict:
    """What OpenRLHF 0.11.2's _fetch_rewards_via_http sends to one server, and how it reads the answer."""
    payload = {"query": queries, "prompts": prompts, "labels": labels}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as session:
        async with session.post(url, json=payload) as response:
            response.raise_for_status()
            return await response.json()


@pytest.mark.parametrize("path", ["/get_reward", "/v1/reward"])
def test_openrlhf_payload_gets_v1_scores_in_every_template(server, path):
    prompts = [p for p, _ in TEMPLATES.values()]
    queries = [p + r for p, r in TEMPLATES.values()]
    got = asyncio.run(openrlhf_post(server.url + path, queries, prompts, [None] * len(queries)))
    assert set(got) >= {"rewards", "scores", "extra_logs"}
    assert len(got["rewards"]) == len(queries) and got["scores"] == got["rewards"]
    assert got["extra_logs"] == {"judge_unscorable": [0.0] * len(queries)}
    # Every template stands for the same item: the question and response as a person wrote them.
    (want,) = v1_score(server, [{"id": "x", "task": "SA", "question": QUESTION, "response": RESPONSE}])
    assert got["rewards"] == pytest.approx([want] * len(queries), abs=1e-4)


def test_openrlhfs_own_client_function(server):
    """OpenRLHF's own code, when it imports here (``pip install --no-deps openrlhf==0.11.2 pylatexenc``; CI
    installs it so): SingleTurnAgentExecutor(remote_rm_url)._fetch_rewards_via_http, as its rollouts call
    it, one query at a time."""
    if importlib.util.find_spec("openrlhf") is None:
        pytest.skip(
            "openrlhf is not installed (pip install --no-deps --target .clients -r tests/requirements-clients.txt)"
        )
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(server.url + "/get_reward")
    prompt, tail = TEMPLATES["chatml"]
    (info,) = asyncio.run(executor._fetch_rewards_via_http([prompt + tail], [prompt], ["a label"]))
    (want,) = v1_score(server, [{"id": "x", "task": "SA", "question": QUESTION, "response": RESPONSE}])
    assert info["rewards"] == pytest.approx([want], abs=1e-4)


def test_labels_images_criterion_and_scale(server):
    """A string label is the reference (MSR shows it); images take the prompt's image places; the request
    may name task, criterion and scale."""
    png = (DEMO / "images" / "msr-000-q0.png").read_bytes()
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    prompt = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>How many squares are there?<|im_end|>\n<|im_start|>assistant\n"
    body = {
        "query": [prompt + "There are 4 squares.<|im_end|>"],
        "prompts": [prompt],
        "labels": ["4"],
        "images": [[url]],
        "task": "MSR",
        "criterion": "final_answer_accuracy",
        "scale": "unit",
    }
    got = httpx.post(server.url + "/v1/reward", json=body, timeout=120).json()
    item = {
        "id": "x",
        "task": "MSR",
        "question": [
            {"type": "image", "image": "images/msr-000-q0.png"},
            {"type": "text", "text": "How many squares are there?"},
        ],
        "response": "There are 4 squares.",
        "reference": "4",
    }
    (want,) = v1_score(server, [item], "final_answer_accuracy")
    assert got["rewards"] == pytest.approx([want / 6], abs=1e-4)
    assert got["judge"]["criterion"] == "final_answer_accuracy" and got["judge"]["scale"] == "unit"


def test_an_unscorable_query_gets_the_fallback_and_a_flag(server):
    good_prompt, good_tail = TEMPLATES["chatml"]
    body = {
        "query": [good_prompt + good_tail, "<|im_start|>assistant\nan answer to nothing<|im_end|>",
                  good_prompt + good_tail],
        "prompts": [good_prompt, "<|im_start|>assistant\n", good_prompt],
        "images": [[], [], ["https://example.com/cat.png"]],
    }  # fmt: skip
    r = httpx.post(server.url + "/get_reward", json=body, timeout=120)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["extra_logs"]["judge_unscorable"] == [0.0, 1.0, 1.0]
    assert got["rewards"][1:] == [0.0, 0.0]
    items = got["judge"]["items"]
    assert (
        items[0]["status"] == "ok"
        and "question" in items[1]["reason"]
        and "fetches nothing" in items[2]["reason"]
    )


@pytest.mark.parametrize(
    "body, words",
    [
        ({"query": ["a"], "prompts": ["a", "b"]}, ["`prompts` has 2 entries for 1 queries"]),
        ({"query": []}, ["`query`"]),
        ({"query": ["a"], "criterion": "nope"}, ["`criterion` 'nope'", "text_quality"]),
        ({"query": ["a"], "task": "XYZ"}, ["`task` 'XYZ'", "SA"]),
        ({"query": ["a"], "querys": ["b"]}, ["`querys`"]),
    ],
)
def test_a_malformed_reward_request_is_a_4xx_naming_the_field(server, body, words):
    r = httpx.post(server.url + "/get_reward", json=body, timeout=60)
    assert r.status_code == 422, r.text
    for w in words:
        assert w in r.json()["error"]["message"]


def test_without_a_reward_task_a_rubric_of_several_families_asks_for_one(tmp_path):
    """OpenRLHF logs only "422 Unprocessable Entity" and trains on with reward None: the server's own output
    says it at start and again (once) when the first such request is refused."""
    with running_server(["--judge", "tiny", "--rubric", "mmie"], tmp_path) as s:
        assert "reward routes (/get_reward, /v1/reward): NO default task family" in s.output()
        for _ in range(2):
            r = httpx.post(s.url + "/get_reward", json={"query": ["a"]}, timeout=60)
            assert r.status_code == 422 and "--reward-task" in r.json()["error"]["message"]
        assert s.output().count("a reward request named no `task`") == 1
    with running_server(["--judge", "tiny", "--rubric", "mmie", "--reward-task", "PBL"], tmp_path) as s:
        assert "reward routes (/get_reward, /v1/reward): task family PBL, criterion overall" in s.output()
