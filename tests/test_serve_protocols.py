"""Other tools' own grading code pointed at judge-serve: prometheus-eval, inspect-ai, lmms-eval, deepeval's
G-Eval and the MT-Bench format. Each call builds its prompt from the installed package's own template (a
release that changes one makes these fail) and parses the reply with the tool's own parser; what it
returns equals the judge's reading of the same item (``/v1/score``, the calibrated expected score) mapped
to the tool's scale by :mod:`judge.serve.protocols.scales`.

The clients come from ``tests/requirements-clients.txt`` (installed with ``--no-deps`` into ``.clients``)
and the dev extra (inspect-ai, litellm, openai)."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import json
import re
from types import SimpleNamespace

import httpx
import openai
import pytest
from openai import OpenAI
from PIL import Image
from serving import REPO, running_server

from judge.models.preference import record_preference
from judge.serve.protocols import REGISTRY, scales
from judge.serve.protocols.base import Reading

DEMO = REPO / "annotations" / "demo"
IMAGE = DEMO / "images" / "sa-000-q0.png"
MODEL = "tiny"
LOGPROB_MODEL = "gpt-4o"  # a name deepeval knows to return logprobs
QUESTION, GOOD, BAD, REFERENCE = "What is 3 + 5?", "3 + 5 = 8.", "It is 9.", "8"


def _clients(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(
            f"{module} is not installed (pip install --no-deps --target .clients -r tests/requirements-clients.txt)"
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--protocol-task", "SA", "--image-root", str(DEMO)]
    args += ["--served-name", MODEL, "--served-name", LOGPROB_MODEL]
    args += ["--chat", "generate"]  # an unrecognised prompt is generated text here (judge-only refuses it)
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture
def env(server, monkeypatch):
    """The environment the tools read their judge endpoint from."""
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("OPENAI_API_URL", server.url + "/v1")  # lmms-eval
    monkeypatch.setenv("JUDGE_BASE_URL", server.url + "/v1")  # inspect-ai's openai-api/judge provider
    monkeypatch.setenv("JUDGE_API_KEY", "unused")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of LiteLLM's price list
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
    return server


def read(server, response: str, reference: str | None = None, question: list | str = QUESTION) -> dict:
    """``/v1/score``'s record of the item as the tool's prompt carries it (task family SA, criterion overall)."""
    item = {"id": "x", "task": "SA", "question": question, "response": response}
    if reference is not None:
        item["reference"] = reference
    r = httpx.post(server.url + "/v1/score", json={"items": [item], "criteria": ["overall"]}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["scores"]["overall"]


def reading(rec: dict) -> Reading:
    return Reading(rec["score"], 0, 6)


def preference(a: dict, b: dict):
    side = [SimpleNamespace(**{"id": k, "raw_score": None, **r}) for k, r in (("A", a), ("B", b))]
    return record_preference(side[0], side[1], list(range(7)))


def lmms_jpeg(path=IMAGE) -> str:
    """The data URL lmms-eval's provider makes of an image (JPEG, quality 85), for /v1/score's copy."""
    from lmms_eval.models.model_utils.media_encoder import encode_image_to_base64

    with Image.open(path) as im:
        data = encode_image_to_base64(im.convert("RGB"), image_format="JPEG", convert_rgb=True, quality=85)
    return f"data:image/jpeg;base64,{data}"


# ----------------------------------------------------------------------------- prometheus-eval


@pytest.mark.slow
def test_prometheus_eval_absolute_and_relative_grading(env):
    """PrometheusEval.single_absolute_grade / single_relative_grade through its own LiteLLM wrapper, with its
    default sampling parameters (temperature 1, top_p 0.9: a scored reply is read, not sampled, so they are
    accepted) and its own parser."""
    _clients("prometheus_eval")
    from prometheus_eval import PrometheusEval
    from prometheus_eval.litellm import LiteLLM
    from prometheus_eval.prompts import (
        ABSOLUTE_PROMPT,
        ABSOLUTE_PROMPT_WO_REF,
        RELATIVE_PROMPT,
        SCORE_RUBRIC_TEMPLATE,
    )

    rubric = SCORE_RUBRIC_TEMPLATE.format(
        criteria="Is the answer correct?", score1_description="wrong", score2_description="mostly wrong",
        score3_description="partly right", score4_description="mostly right", score5_description="right",
    )  # fmt: skip
    judge = PrometheusEval(
        model=LiteLLM(f"openai/{MODEL}", api_base=env.url + "/v1"),
        absolute_grade_template=ABSOLUTE_PROMPT,
        relative_grade_template=RELATIVE_PROMPT,
    )
    for response, ref in ((GOOD, REFERENCE), (BAD, None)):
        judge.absolute_grade_template = ABSOLUTE_PROMPT if ref else ABSOLUTE_PROMPT_WO_REF
        feedback, score = judge.single_absolute_grade(
            instruction=QUESTION, response=response, rubric=rubric, reference_answer=ref
        )
        assert score == scales.integer_scale(reading(read(env, response, ref)), 1, 5)
        assert "'overall' of task family 'SA'" in feedback  # says what was scored
    feedback, verdict = judge.single_relative_grade(
        instruction=QUESTION, response_A=GOOD, response_B=BAD, rubric=rubric, reference_answer=REFERENCE
    )
    pref = preference(read(env, GOOD, REFERENCE), read(env, BAD, REFERENCE))
    assert verdict == scales.preference_verdict(pref.p_first_better, ties=False)


# ----------------------------------------------------------------------------- inspect-ai


@pytest.mark.parametrize("kind", ["qa", "qa-partial", "fact"])
def test_inspect_ai_model_graded_scorers(env, kind):
    """inspect-ai's model_graded_qa / model_graded_fact scorers, their own templates, grade pattern and
    validation, with the openai-api provider pointed at the server."""
    from inspect_ai.model import ChatMessageUser, ModelOutput, get_model
    from inspect_ai.scorer import Target, model_graded_fact, model_graded_qa
    from inspect_ai.solver import TaskState

    grader = get_model(f"openai-api/judge/{MODEL}")
    scorer = {
        "qa": lambda: model_graded_qa(model=grader),
        "qa-partial": lambda: model_graded_qa(model=grader, partial_credit=True),
        "fact": lambda: model_graded_fact(model=grader),
    }[kind]()
    state = TaskState(
        model="mockllm/model", sample_id=1, epoch=1, input=QUESTION, messages=[ChatMessageUser(content=QUESTION)],
        output=ModelOutput.from_content("mockllm/model", GOOD),
    )  # fmt: skip
    score = asyncio.run(scorer(state, Target(REFERENCE)))
    want = scales.grade(reading(read(env, GOOD, REFERENCE)), partial=kind == "qa-partial")
    assert score.value == want


def _inspect_qa(env, **kwargs):
    """model_graded_qa with the given custom instructions/grade_pattern, graded by the server; the Score."""
    from inspect_ai.model import ChatMessageUser, ModelOutput, get_model
    from inspect_ai.scorer import Target, model_graded_qa
    from inspect_ai.solver import TaskState

    scorer = model_graded_qa(model=get_model(f"openai-api/judge/{MODEL}"), **kwargs)
    state = TaskState(
        model="mockllm/model", sample_id=1, epoch=1, input=QUESTION, messages=[ChatMessageUser(content=QUESTION)],
        output=ModelOutput.from_content("mockllm/model", GOOD),
    )  # fmt: skip
    return asyncio.run(scorer(state, Target(REFERENCE)))


def test_inspect_ai_custom_instructions_offering_partial_credit_in_their_own_words(env):
    """Custom instructions that offer P in other words than the default's are answered C, P or I (issue 41:
    they were graded C/I only)."""
    custom = (
        "Grade the submission against the criterion. Use C when it fully meets it, P if it is only partly "
        "right, I otherwise. End with GRADE: followed by the letter."
    )
    score = _inspect_qa(env, instructions=custom)
    assert score.value == scales.grade(reading(read(env, GOOD, REFERENCE)), partial=True)


def test_inspect_ai_custom_instructions_with_their_own_score_format(env):
    """Custom instructions that ask for 'SCORE: n' from 0 to 10, read by a matching grade_pattern: the answer
    is in that format, on that range (issue 41: it came back NaN)."""
    custom = "Rate how well the submission meets the criterion from 0 to 10. End with 'SCORE: n'."
    score = _inspect_qa(env, instructions=custom, grade_pattern=r"SCORE: (\d+)")
    assert score.value == str(scales.integer_scale(reading(read(env, GOOD, REFERENCE)), 0, 10))


def test_inspect_ai_custom_instructions_in_a_format_the_server_cannot_read_are_refused(env):
    """Instructions asking for neither GRADE nor a score on a stated range get a 422 saying what was not
    understood, never generated text a grade_pattern turns into NaN."""
    from inspect_ai.scorer._model import DEFAULT_MODEL_GRADED_QA_TEMPLATE

    for custom, said in (
        ("Answer VERDICT: yes or VERDICT: no.", "no answer format this server reads"),
        ("End with 'SCORE: n'.", "state no range"),
    ):
        prompt = DEFAULT_MODEL_GRADED_QA_TEMPLATE.format(
            question=QUESTION, answer=GOOD, criterion=REFERENCE, instructions=custom
        )
        r = httpx.post(env.url + "/v1/chat/completions", json={"model": MODEL, "temperature": 0,
                       "messages": [{"role": "user", "content": prompt}]}, timeout=60)  # fmt: skip
        assert r.status_code == 422, r.text
        assert said in r.json()["error"]["message"]


# ----------------------------------------------------------------------------- lmms-eval


@pytest.fixture
def lmms(env):
    _clients("lmms_eval")
    from lmms_eval.llm_judge.protocol import ServerConfig
    from lmms_eval.llm_judge.providers.openai import OpenAIProvider

    config = ServerConfig(model_name=MODEL, temperature=0, max_tokens=256, num_retries=1)
    return OpenAIProvider(config)


def test_lmms_eval_binary_and_correctness(env, lmms):
    """evaluate_binary (0/1 and yes/no) and the correctness prompt, parsed by lmms-eval's ResponseParser:
    a correct answer is no longer counted wrong because the judge talked instead of answering 1."""
    from lmms_eval.llm_judge.protocol import Request
    from lmms_eval.llm_judge.utils import JudgePromptBuilder, ResponseParser

    correct = scales.binary(reading(read(env, "8", REFERENCE, question="What is 3+5?")))
    assert lmms.evaluate_binary(question="What is 3+5?", answer="8", prediction="8")["result"] == int(correct)
    yes = lmms.evaluate_binary(question="What is 3+5?", answer="8", prediction="8", output_format="yes/no")
    assert yes["result"] is correct and yes["success"]
    prompt = JudgePromptBuilder.build_correctness_prompt(question="What is 3+5?", answer="8", prediction="8")
    reply = lmms.evaluate(Request(messages=[{"role": "user", "content": prompt}], config=lmms.config))
    assert ResponseParser.parse_binary_response(reply.content, "yes/no") is correct
    assert reply.raw_response.model_extra["judge"]["protocol"] == "lmms-eval-correctness"


def test_lmms_eval_rubric_scores_each_item(env, lmms):
    """evaluate_with_rubric: a JSON object with every rubric item; an item with a stated range gets the
    judge's overall reading on it, an item named like one of the judge's criteria gets that criterion."""
    out = lmms.evaluate_with_rubric(
        question=QUESTION,
        prediction=GOOD,
        rubric={"accuracy": "is it right (1-10)", "text_quality": "fluency"},
    )
    assert out["success"] and set(out["scores"]) == {"accuracy", "text_quality"}
    assert out["scores"]["accuracy"] == scales.integer_scale(reading(read(env, GOOD)), 1, 10)
    r = httpx.post(env.url + "/v1/score", json={"items": [{"id": "x", "task": "SA", "question": QUESTION,
                   "response": GOOD}], "criteria": ["text_quality"]}, timeout=60)  # fmt: skip
    assert out["scores"]["text_quality"] == pytest.approx(
        r.json()["results"][0]["scores"]["text_quality"]["score"], abs=1e-3
    )


@pytest.mark.parametrize(
    ("written", "scale"),
    [("1-10", (1, 10)), ("scored 1-10", (1, 10)), ("1 to 5", (1, 5)), ("Accuracy, rated 1 to 5.", (1, 5))],
)
def test_lmms_eval_rubric_reads_a_range_written_bare(env, lmms, written, scale):
    """lmms-eval's docs write a rubric item's range bare ({"accuracy": "1-10"}): the answer is on that range,
    not the judge's own 0-6 reading (issue 41: 3.1376 came back for "1-10")."""
    out = lmms.evaluate_with_rubric(question=QUESTION, prediction=GOOD, rubric={"accuracy": written})
    assert out["success"]
    assert out["scores"]["accuracy"] == scales.integer_scale(reading(read(env, GOOD)), *scale)
    assert isinstance(out["scores"]["accuracy"], int)


def test_lmms_eval_rubric_item_with_numbers_in_its_words_is_not_a_scale(env, lmms):
    """A description that mentions numbers in other words ("the 2-3 key facts") states no scale: the item
    gets the judge's own reading, as an item with no range does."""
    out = lmms.evaluate_with_rubric(
        question=QUESTION, prediction=GOOD, rubric={"accuracy": "covers the 2-3 key facts"}
    )
    assert out["scores"]["accuracy"] == pytest.approx(reading(read(env, GOOD)).expected, abs=1e-3)


def test_lmms_eval_comparative_with_request_images(env, lmms):
    """evaluate_comparative with images: lmms-eval appends Request.images after the prompt's text, and they
    are the question's images; the two scores on its 1-10 scale."""
    with Image.open(IMAGE) as im:
        out = lmms.evaluate_comparative(question="Describe the image.", response1="A red square.",
                                        response2="Nothing.", images=[im.copy()])  # fmt: skip
    question = [{"type": "text", "text": "Describe the image."}, {"type": "image", "image": lmms_jpeg()}]
    want = tuple(float(scales.integer_scale(reading(read(env, r, question=question)), 1, 10))
                 for r in ("A red square.", "Nothing."))  # fmt: skip
    assert out["scores"] == want


def test_multimodal_rewardbench_mt_bench_pair_with_an_image(env, lmms):
    """lmms-eval's multimodal_rewardbench task: MT-Bench's pairwise prompt with the item's image (its
    doc_to_visual), graded by the task's own process_results."""
    from lmms_eval.llm_judge.protocol import Request

    path = REPO / ".clients" / "lmms_eval" / "tasks" / "multimodal_rewardbench" / "utils.py"
    spec = importlib.util.spec_from_file_location("mmrb_utils", path)
    assert spec is not None and spec.loader is not None
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    doc = {"Text": "Describe the image.", "Output1": "Nothing.", "Output2": "A red square.", "ID": "1",
           "Category": "x", "Better": "Output2"}  # fmt: skip
    with Image.open(IMAGE) as im:
        reply = lmms.evaluate(Request(messages=[{"role": "user", "content": task.get_judge_prompt(doc)}],
                                      images=[im.convert("RGB")], config=lmms.config))  # fmt: skip
    assert reply.raw_response.model_extra["judge"]["protocol"] == "mt-bench-pair"
    question = [{"type": "text", "text": "Describe the image."}, {"type": "image", "image": lmms_jpeg()}]
    pref = preference(read(env, "Nothing.", question=question), read(env, "A red square.", question=question))
    want = scales.preference_verdict(pref.p_first_better, ties=False)  # the prompt offers no tie
    assert task.extract_judgment(reply.content) == want
    got = task.multimodal_rewardbench_process_results(doc, [reply.content])
    assert got["multimodal_rewardbench_accuracy"]["score"] == int(want == "B")


# ----------------------------------------------------------------------------- deepeval G-Eval


@pytest.mark.slow
@pytest.mark.parametrize("model", [MODEL, LOGPROB_MODEL, "strict"])
def test_deepeval_geval(env, model):
    """deepeval's GEval: its steps prompt (answered with the criteria, unscored) and its results prompt,
    parsed by deepeval: the JSON score on 0-10 (``tiny``, a model deepeval asks no logprobs of), the
    logprob-weighted score (``gpt-4o``: the server's top_logprobs carry the calibrated distribution onto
    0-10), and strict_mode's 0/1."""
    _clients("deepeval")
    from deepeval.metrics import GEval
    from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase, SingleTurnParams

    llm = GPTModel(model=LOGPROB_MODEL if model == LOGPROB_MODEL else MODEL, base_url=env.url + "/v1",
                   api_key="unused")  # fmt: skip
    metric = GEval(
        name="Correctness", criteria="Is the actual output a correct answer to the input?",
        evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT], model=llm,
        async_mode=False, strict_mode=model == "strict",
    )  # fmt: skip
    got = metric.measure(LLMTestCase(input=QUESTION, actual_output=GOOD))
    assert metric.evaluation_steps == ["Is the actual output a correct answer to the input?"]
    r = reading(read(env, GOOD))
    if model == "strict":
        assert got == float(scales.binary(r))
    elif model == MODEL:
        assert got == scales.integer_scale(r, 0, 10) / 10
    else:  # deepeval drops tokens under 1% before weighting: within that of the mapped score
        assert got == pytest.approx(scales.point(r, 0, 10) / 10, abs=0.01)
    assert "'overall' of task family 'SA'" in (metric.reason or "")


# ----------------------------------------------------------------------------- the MT-Bench format


def _mt_bench_single(instructions: str, ref: bool) -> str:
    ref_part = (
        f"[The Start of Reference Answer]\n{REFERENCE}\n[The End of Reference Answer]\n\n" if ref else ""
    )
    return (f"[Instruction]\n{instructions}\n\n[Question]\n{QUESTION}\n\n{ref_part}"
            f"[The Start of Assistant's Answer]\n{GOOD}\n[The End of Assistant's Answer]")  # fmt: skip


@pytest.mark.parametrize(
    ("instructions", "ref", "want"),
    [
        ('Judge the answer. Rate it on a scale of 1 to 10 in this format: "[[rating]]", e.g. "Rating: [[5]]".',
         False, lambda r: scales.integer_scale(r, 1, 10)),
        ('Compare with the reference. Rate it with either 0, 0.5 or 1 in this format: "[[rating]]", for '
         'example: "Rating: [[0.5]]".', True, lambda r: scales.nearest_choice(r, [0, 0.5, 1])),
    ],
    ids=["1-10", "0-0.5-1"],
)  # fmt: skip
def test_mt_bench_single(env, client, instructions, ref, want):
    """MT-Bench's single-answer format (FastChat ships its judge prompts outside its wheel, so the prompt is
    written here in its format; the score is read with lmms-eval egothink's copy of FastChat's pattern)."""
    _clients("lmms_eval")
    path = REPO / ".clients" / "lmms_eval" / "tasks" / "egothink" / "utils.py"
    pattern = re.compile(re.search(r"one_score_pattern = re.compile\(\"(.+?)\"\)", path.read_text()).group(1))  # type: ignore[union-attr]
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": _mt_bench_single(instructions, ref)}]  # fmt: skip
    r = client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=2048)
    m = pattern.search(r.choices[0].message.content or "")
    assert m is not None and float(m.group(1)) == want(reading(read(env, GOOD, REFERENCE if ref else None)))


def test_mt_bench_pair_with_a_tie(env, client):
    """MT-Bench's pairwise format with its tie verdict: the same response on both sides is a tie ([[C]])."""
    system = ('Act as an impartial judge of two AI assistants. Output your final verdict by strictly following '
              'this format: "[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" '
              "for a tie.")  # fmt: skip

    def ask(a: str, b: str) -> str:
        user = (f"[User Question]\n{QUESTION}\n\n[The Start of Assistant A's Answer]\n{a}\n[The End of Assistant "
                f"A's Answer]\n\n[The Start of Assistant B's Answer]\n{b}\n[The End of Assistant B's Answer]")  # fmt: skip
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "system", "content": system},
                                                                  {"role": "user", "content": user}])  # fmt: skip
        content = r.choices[0].message.content or ""
        return (
            "A" if "[[A]]" in content else "B" if "[[B]]" in content else "tie" if "[[C]]" in content else "?"
        )

    assert ask(GOOD, GOOD) == "tie"
    pref = preference(read(env, GOOD), read(env, BAD))
    assert ask(GOOD, BAD) == scales.preference_verdict(pref.p_first_better, ties=True)


# ----------------------------------------------------------------------------- what the reply says


def test_the_reply_names_what_was_scored(env, client):
    from prometheus_eval.prompts import ABSOLUTE_PROMPT_WO_REF

    _clients("prometheus_eval")
    prompt = ABSOLUTE_PROMPT_WO_REF.format(instruction=QUESTION, response=GOOD, rubric="[Is it funny?]")
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], logprobs=True, top_logprobs=5
    )
    assert (
        raw.headers["x-judge-protocol"] == "prometheus-absolute" and raw.headers["x-judge-scored"] == "true"
    )
    r = raw.parse()
    judged = (r.model_extra or {})["judge"]
    assert judged["family"] == "SA" and judged["criterion"] == "overall"
    assert judged["tool_criterion"] == "[Is it funny?]"
    want = read(env, GOOD)
    assert judged["expected"] == pytest.approx(want["score"], abs=1e-4)
    assert judged["value"] == scales.integer_scale(reading(want), 1, 5)
    (entry,) = r.choices[0].logprobs.content  # type: ignore[union-attr,misc]
    assert entry.token == str(judged["value"]) and len(entry.top_logprobs) == 5
    # The tokens' probabilities are the calibrated distribution carried onto 1-5: their mean is the point.
    probs = scales.integer_distribution(reading(want), want["distribution"], 1, 5)
    assert sum(k * p for k, p in probs.items()) == pytest.approx(scales.point(reading(want), 1, 5), abs=1e-6)


def test_an_unrecognised_prompt_keeps_todays_behaviour(client):
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "Rate this answer from 1 to 10: 8"}], max_tokens=2
    )
    assert raw.headers["x-judge-scored"] == "false" and "x-judge-protocol" not in raw.headers
    assert (raw.parse().model_extra or {})["judge"] is None


def test_a_broken_tool_prompt_is_a_422_naming_the_tool(client):
    from prometheus_eval.prompts import ABSOLUTE_PROMPT_WO_REF

    _clients("prometheus_eval")
    prompt = ABSOLUTE_PROMPT_WO_REF.format(instruction=QUESTION, response=GOOD, rubric="x").replace(
        "###The instruction to evaluate:", "###Instruction:"
    )
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}])
    assert "prometheus-eval" in e.value.message and "###The instruction to evaluate:" in e.value.message


def test_a_json_schema_with_one_number_gets_the_score(env, client):
    """response_format json_schema (what openai's parse helper and langchain's structured output send) on a
    scored reply: the number is the score; on generated text it is refused, not ignored."""
    from pydantic import BaseModel

    from judge.serve.judge_prompt import judge_chat_messages

    class Verdict(BaseModel):
        score: float
        reason: str

    item = {"id": "x", "task": "SA", "question": QUESTION, "response": GOOD}
    parsed = client.chat.completions.parse(
        model=MODEL, messages=judge_chat_messages("mmie", item, "overall"), response_format=Verdict
    )
    verdict = parsed.choices[0].message.parsed
    assert verdict is not None and verdict.score == pytest.approx(read(env, GOOD)["score"], abs=1e-4)
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.parse(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], response_format=Verdict
        )
    assert e.value.code == "format_not_supported"


def test_registry_lists_every_protocol_with_its_answer():
    assert {"prometheus-absolute", "prometheus-relative", "inspect-model-graded-qa", "inspect-model-graded-fact",
            "lmms-eval-binary", "lmms-eval-correctness", "lmms-eval-comparative", "lmms-eval-rubric",
            "deepeval-geval", "deepeval-geval-steps", "mt-bench-single", "mt-bench-pair"} <= set(REGISTRY)  # fmt: skip
    assert all(p.answer and p.tool for p in REGISTRY.values())


def _jpeg_data_url() -> str:
    buf = io.BytesIO()
    with Image.open(IMAGE) as im:
        im.convert("RGB").save(buf, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def test_images_inside_a_field_stay_in_that_field(env, client):
    """An image part inside the response field of a tool's template belongs to the response."""
    from inspect_ai.scorer._model import DEFAULT_MODEL_GRADED_QA_TEMPLATE

    url = _jpeg_data_url()
    text = DEFAULT_MODEL_GRADED_QA_TEMPLATE.format(question=QUESTION, answer="@@", criterion=REFERENCE,
                                                    instructions="Reply GRADE: C or GRADE: I.")  # fmt: skip
    before, after = text.split("@@")
    content = [{"type": "text", "text": before + "Here:"}, {"type": "image_url", "image_url": {"url": url}},
               {"type": "text", "text": after}]  # fmt: skip
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}])
    judged = (r.model_extra or {})["judge"]
    want = read(env, [{"type": "text", "text": "Here:"}, {"type": "image", "image": url}], REFERENCE)  # type: ignore[arg-type]
    assert judged["expected"] == pytest.approx(want["score"], abs=1e-4)
    assert json.dumps(judged)  # plain JSON
