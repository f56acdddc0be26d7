"""Each evaluation tool's own grading call against a judge-serve of the tiny judge, and what it returned.

Starts a ``judge-serve`` (``--judge tiny --rubric mmie``, served as ``tiny`` and ``gpt-4o``, plus
``--protocol-task SA`` when the server's code has that flag) from ``--server-src`` (default: this
checkout; a checkout of an older commit gives the "before" column), runs each tool's call on one item
(question "What is 3+5?", response "8", reference "8") with the tools' default settings, and prints what
each returned beside the judge's reading of the same item (``/v1/score`` of this checkout's server, task
family SA, criterion overall) mapped to the tool's scale (``judge.serve.protocols.scales``). Writes JSON
(``benchmarks/results/protocol_clients_cpu.json`` or ``--out``).

    python scripts/protocol_clients.py                                  # after
    git archive OLD | tar -x -C /tmp/old && python scripts/protocol_clients.py --server-src /tmp/old \\
        --out /tmp/before.json                                          # before

The tools come from the dev extra and ``tests/requirements-clients.txt`` (``.clients``). A call is given
``--call-timeout`` seconds (a tool retrying generated text can take minutes); what it raised is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.append(str(REPO / ".clients"))

from bench_huge_images import run_facts  # noqa: E402

Q, R, REF = "What is 3+5?", "8", "8"


def start(src: Path, log: Path) -> tuple[str, subprocess.Popen]:
    help_text = subprocess.run([sys.executable, "-m", "judge.cli.serve", "--help"], cwd=src, capture_output=True,
                               text=True, env={**os.environ, "PYTHONPATH": str(src)}).stdout  # fmt: skip
    args = [
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--served-name",
        "tiny",
        "--served-name",
        "gpt-4o",
        "--port",
        "0",
    ]
    if "--protocol-task" in help_text:
        args += ["--protocol-task", "SA"]
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "judge.cli.serve", *args], cwd=src, env=env, stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 300
    url = None
    while time.monotonic() < deadline:
        text = log.read_text()
        if url is None and "listening on " in text:
            url = text.split("listening on ")[1].split()[0]
        if url is not None:
            try:
                if httpx.get(url + "/ready", timeout=2).status_code == 200:
                    return url, proc
            except httpx.TransportError:
                pass
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"judge-serve did not start:\n{log.read_text()}")


def bounded(fn: Callable[[], Any], seconds: float) -> tuple[Any, float]:
    """``fn()``'s value (or what it raised, as text), and its seconds; past ``seconds`` it is left running."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # a tool's own failure is a result here
            box["value"] = f"raised {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"

    t0 = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    took = time.perf_counter() - t0
    return box.get("value", f"no answer within {seconds:g} s"), took


IMAGE = REPO / "annotations" / "demo" / "images" / "sa-000-q0.png"


def _rewardbench():
    """lmms-eval's multimodal_rewardbench task module, loaded from its file (its package imports much)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "mmrb_utils", REPO / ".clients" / "lmms_eval" / "tasks" / "multimodal_rewardbench" / "utils.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def calls(url: str) -> list[tuple[str, str, str, Callable[[], Any]]]:
    """(tool, package, its grading call, a function making it)."""
    os.environ.update(OPENAI_API_KEY="unused", OPENAI_API_URL=url + "/v1", JUDGE_BASE_URL=url + "/v1",
                      JUDGE_API_KEY="unused", LITELLM_LOCAL_MODEL_COST_MAP="True", DEEPEVAL_TELEMETRY_OPT_OUT="1")  # fmt: skip
    rubric = "[Is the answer correct?]\nScore 1: wrong\nScore 2: -\nScore 3: -\nScore 4: -\nScore 5: right"

    def prometheus(relative: bool):
        from prometheus_eval import PrometheusEval
        from prometheus_eval.litellm import LiteLLM
        from prometheus_eval.prompts import ABSOLUTE_PROMPT, RELATIVE_PROMPT

        judge = PrometheusEval(model=LiteLLM("openai/tiny", api_base=url + "/v1"),
                               absolute_grade_template=ABSOLUTE_PROMPT, relative_grade_template=RELATIVE_PROMPT)  # fmt: skip
        if relative:
            return judge.single_relative_grade(instruction=Q, response_A=R, response_B="9", rubric=rubric,
                                               reference_answer=REF)[1]  # fmt: skip
        return judge.single_absolute_grade(instruction=Q, response=R, rubric=rubric, reference_answer=REF)[1]

    def inspect(kind: str, provider: str = "openai-api"):
        from inspect_ai.model import ChatMessageUser, ModelOutput, get_model
        from inspect_ai.scorer import Target, model_graded_fact, model_graded_qa
        from inspect_ai.solver import TaskState

        if provider == "openai":  # inspect's openai/ provider calls the Responses API
            os.environ["OPENAI_BASE_URL"] = url + "/v1"
            grader = get_model("openai/tiny")
        else:
            grader = get_model("openai-api/judge/tiny")
        scorer = model_graded_qa(model=grader) if kind == "qa" else model_graded_fact(model=grader)
        state = TaskState(model="mockllm/model", sample_id=1, epoch=1, input=Q, messages=[ChatMessageUser(content=Q)],
                          output=ModelOutput.from_content("mockllm/model", R))  # fmt: skip
        return asyncio.run(scorer(state, Target(REF))).value

    def lmms():
        from lmms_eval.llm_judge.protocol import ServerConfig
        from lmms_eval.llm_judge.providers.openai import OpenAIProvider

        return OpenAIProvider(ServerConfig(model_name="tiny", num_retries=1))

    def geval(model: str):
        from deepeval.metrics import GEval
        from deepeval.models import GPTModel
        from deepeval.test_case import LLMTestCase, SingleTurnParams

        metric = GEval(name="Correctness", criteria="Is the actual output a correct answer to the input?",
                       evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT], async_mode=False,
                       model=GPTModel(model=model, base_url=url + "/v1", api_key="unused"))  # fmt: skip
        return round(metric.measure(LLMTestCase(input=Q, actual_output=R)), 4)

    def rewardbench():
        from lmms_eval.llm_judge.protocol import Request
        from PIL import Image

        provider = lmms()
        doc = {"Text": "Describe the image.", "Output1": "Nothing.", "Output2": "A red square."}
        with Image.open(IMAGE) as im:
            reply = provider.evaluate(Request(messages=[{"role": "user", "content": _rewardbench().get_judge_prompt(doc)}],
                                              images=[im.convert("RGB")], config=provider.config))  # fmt: skip
        return _rewardbench().extract_judgment(reply.content)

    def mt_bench_single():
        import re

        from openai import OpenAI

        user = ('[Instruction]\nJudge the answer. Rate it on a scale of 1 to 10 in this format: "[[rating]]", e.g. '
                f'"Rating: [[5]]".\n\n[Question]\n{Q}\n\n[The Start of Assistant\'s Answer]\n{R}\n'
                "[The End of Assistant's Answer]")  # fmt: skip
        reply = OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0).chat.completions.create(
            model="tiny", temperature=0, max_tokens=2048,
            messages=[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": user}],
        )  # fmt: skip
        m = re.search(r"\[\[(\d+\.?\d*)\]\]", reply.choices[0].message.content or "")  # FastChat's pattern
        return float(m.group(1)) if m else -1

    return [*_tool_calls(url, prometheus, inspect, lmms, geval, rewardbench, mt_bench_single),
            *_new_tool_calls(url), *_shape_calls(url)]  # fmt: skip


def _tool_calls(url, prometheus, inspect, lmms, geval, rewardbench, mt_bench_single):
    return [
        ("prometheus-eval", "prometheus-eval", "single_absolute_grade", lambda: prometheus(False)),
        ("prometheus-eval", "prometheus-eval", "single_relative_grade (B: '9')", lambda: prometheus(True)),
        ("inspect-ai", "inspect-ai", "model_graded_qa", lambda: inspect("qa")),
        ("inspect-ai", "inspect-ai", "model_graded_fact", lambda: inspect("fact")),
        ("inspect-ai", "inspect-ai", "model_graded_qa, openai/ (/v1/responses)", lambda: inspect("qa", "openai")),
        ("lmms-eval", "lmms-eval", "evaluate_binary", lambda: lmms().evaluate_binary(question=Q, answer=REF, prediction=R)["result"]),
        ("lmms-eval", "lmms-eval", "evaluate_with_rubric {accuracy: 1-10}",
         lambda: lmms().evaluate_with_rubric(question=Q, prediction=R, rubric={"accuracy": "correct? (1-10)"})["scores"]),
        ("lmms-eval", "lmms-eval", "evaluate_comparative (B: '9')",
         lambda: lmms().evaluate_comparative(question=Q, response1=R, response2="9")["scores"]),
        ("deepeval", "deepeval", "GEval.measure (model tiny: JSON score)", lambda: geval("tiny")),
        ("deepeval", "deepeval", "GEval.measure (model gpt-4o: logprobs)", lambda: geval("gpt-4o")),
        ("lmms-eval", "lmms-eval", "multimodal_rewardbench extract_judgment", rewardbench),
        ("MT-Bench format", "openai", "single grading, Rating: [[n]]", mt_bench_single),
    ]  # fmt: skip


def _new_tool_calls(url: str) -> list[tuple[str, str, str, Callable[[], Any]]]:
    """ragas' metrics (through llm_factory: json_object at temperature 0.01) and phoenix's evaluators
    (json_schema strict with a label enum), each on the item with its reference."""

    def ragas_llm():
        from openai import AsyncOpenAI
        from ragas.llms import llm_factory

        return llm_factory("tiny", client=AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0))

    def ragas_single(name: str):
        from ragas.dataset_schema import SingleTurnSample
        from ragas.metrics import AspectCritic, SimpleCriteriaScore

        metric = (AspectCritic(name="correct", definition="Is the response correct?", llm=ragas_llm()) if name == "aspect"
                  else SimpleCriteriaScore(name="sim", definition="Score 0 to 5 by similarity", llm=ragas_llm()))  # fmt: skip
        return asyncio.run(
            metric.single_turn_ascore(SingleTurnSample(user_input=Q, response=R, reference=REF))
        )

    def ragas_evaluate():
        from ragas import EvaluationDataset, evaluate
        from ragas.metrics import AspectCritic

        data = EvaluationDataset.from_list([{"user_input": Q, "response": R, "reference": REF}])
        out = evaluate(dataset=data, metrics=[AspectCritic(name="correct", definition="Is the response correct?")],
                       llm=ragas_llm(), show_progress=False)  # fmt: skip
        return float(out.to_pandas()["correct"][0])

    def ragas_discrete():
        from ragas.metrics import DiscreteMetric

        metric = DiscreteMetric(name="q", prompt="Check the response: {response}. Return 'pass' or 'fail'.",
                                allowed_values=["pass", "fail"])  # fmt: skip
        try:
            return asyncio.run(metric.ascore(llm=ragas_llm(), response=R)).value
        except Exception as e:  # the tool raises the server's refusal
            return "422" if "422" in str(e) else f"raised {type(e).__name__}"

    def phoenix(name: str, field: str):
        from phoenix.evals import LLM, metrics

        evaluator = getattr(metrics, name)(
            llm=LLM(provider="openai", model="tiny", base_url=url + "/v1", api_key="unused")
        )
        return evaluator.evaluate({"input": Q, field: R})[0].label

    def phoenix_dataframe():
        import pandas as pd
        from phoenix.evals import LLM, evaluate_dataframe
        from phoenix.evals.metrics import CorrectnessEvaluator

        llm = LLM(provider="openai", model="tiny", base_url=url + "/v1", api_key="unused")
        out = evaluate_dataframe(
            dataframe=pd.DataFrame({"input": [Q], "output": [R]}), evaluators=[CorrectnessEvaluator(llm=llm)]
        )
        score = out["correctness_score"][0]
        return (json.loads(score) if isinstance(score, str) else score or {}).get("label")

    return [
        ("ragas", "ragas", "AspectCritic.single_turn_ascore", lambda: ragas_single("aspect")),
        ("ragas", "ragas", "SimpleCriteriaScore 'Score 0 to 5'", lambda: ragas_single("simple")),
        ("ragas", "ragas", "evaluate([AspectCritic])", ragas_evaluate),
        ("ragas", "ragas", "DiscreteMetric.ascore (free prompt)", ragas_discrete),
        ("arize-phoenix-evals", "arize-phoenix-evals", "CorrectnessEvaluator.evaluate", lambda: phoenix("CorrectnessEvaluator", "output")),
        ("arize-phoenix-evals", "arize-phoenix-evals", "RetrievalRelevanceEvaluator.evaluate", lambda: phoenix("RetrievalRelevanceEvaluator", "context")),
        ("arize-phoenix-evals", "arize-phoenix-evals", "HallucinationEvaluator.evaluate", lambda: phoenix("HallucinationEvaluator", "output")),
        ("arize-phoenix-evals", "arize-phoenix-evals", "evaluate_dataframe([Correctness])", phoenix_dataframe),
    ]  # fmt: skip


#: The request shapes of issue 41 section 2, on the judge's own prompt (the reply: the value the shape asks
#: for, or the status code), and section 3's default for a conversation the server does not recognise.
_LABELS = {"type": "string", "enum": ["correct", "incorrect"]}


def _shape_calls(url: str) -> list[tuple[str, str, str, Callable[[], Any]]]:
    from judge.serve.judge_prompt import judge_chat_messages

    item = {"id": "x", "task": "SA", "question": Q, "response": R, "reference": REF}
    msgs = judge_chat_messages("mmie", item, "overall")

    def schema(prop: dict) -> dict:
        return {"type": "object", "properties": {"verdict": prop, "reason": {"type": "string"}},
                "required": ["verdict", "reason"], "additionalProperties": False}  # fmt: skip

    def chat(**body: Any) -> httpx.Response:
        return httpx.post(
            url + "/v1/chat/completions", json={"model": "tiny", "messages": msgs, **body}, timeout=60
        )

    def as_schema(prop: dict, strict: bool):
        fmt = {
            "type": "json_schema",
            "json_schema": {"name": "grade", "schema": schema(prop), "strict": strict},
        }
        r = chat(response_format=fmt)
        return (
            json.loads(r.json()["choices"][0]["message"]["content"])["verdict"]
            if r.status_code == 200
            else str(r.status_code)
        )

    def json_object():
        r = chat(response_format={"type": "json_object"})
        return (
            round(json.loads(r.json()["choices"][0]["message"]["content"])["score"], 4)
            if r.status_code == 200
            else str(r.status_code)
        )

    def tool():
        tools = [{"type": "function", "function": {"name": "grade", "parameters": schema(_LABELS)}}]
        r = chat(tools=tools, tool_choice={"type": "function", "function": {"name": "grade"}})
        if r.status_code != 200:
            return str(r.status_code)
        return json.loads(r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])[
            "verdict"
        ]

    def greedy():
        # The judge's own prompt: a free conversation is refused by default (--chat judge-only).
        r = httpx.post(url + "/v1/chat/completions", timeout=120, json={
            "model": "tiny", "messages": msgs, "max_tokens": 2, "temperature": 0.01, "top_p": 0.1,
            "response_format": {"type": "text"}})  # fmt: skip
        return f"{r.status_code} {r.headers.get('x-judge-sampling', '')}".strip()

    def unrecognised():
        r = httpx.post(url + "/v1/chat/completions", timeout=120, json={
            "model": "tiny", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2})  # fmt: skip
        return f"{r.status_code} scored={r.headers.get('x-judge-scored', '-')}"

    # The Responses API's input: the same messages, their text parts as input_text.
    inputs = [{**m, "content": [{**p, "type": "input_text"} for p in m["content"]]} for m in msgs]

    def responses(stream: bool):
        r = httpx.post(url + "/v1/responses", timeout=60, json={"model": "tiny", "input": inputs, "stream": stream,
                       "text": {"format": {"type": "json_schema", "name": "grade", "schema": schema(_LABELS), "strict": True}}})  # fmt: skip
        if r.status_code != 200 or stream:
            return str(r.status_code)
        out = r.json()
        text = out.get("output_text") or out["output"][0]["content"][0]["text"]
        return json.loads(text)["verdict"]

    return [
        ("request shape", "openai", "json_schema strict, number 0..1", lambda: as_schema({"type": "number", "minimum": 0, "maximum": 1}, True)),
        ("request shape", "openai", "json_schema non-strict, integer 1..5", lambda: as_schema({"type": "integer", "minimum": 1, "maximum": 5}, False)),
        ("request shape", "openai", "json_schema strict, boolean", lambda: as_schema({"type": "boolean"}, True)),
        ("request shape", "openai", "json_schema strict, enum correct/incorrect", lambda: as_schema(_LABELS, True)),
        ("request shape", "openai", "json_schema, labels red/green/blue", lambda: as_schema({"type": "string", "enum": ["red", "green", "blue"]}, True)),
        ("request shape", "openai", "json_object (judge's prompt)", json_object),
        ("request shape", "openai", "forced tool call, enum label", tool),
        ("request shape", "openai", "temperature 0.01, top_p 0.1 (judge's prompt)", greedy),
        ("request shape", "openai", "/v1/responses, json_schema", lambda: responses(False)),
        ("request shape", "openai", "/v1/responses, stream", lambda: responses(True)),
        ("request shape", "openai", "unrecognised conversation", unrecognised),
    ]  # fmt: skip


def wanted(url: str) -> list[Any]:
    """The judge's reading of the same items (/v1/score) mapped to each call's scale, in ``calls``' order."""
    from judge.models.preference import record_preference
    from judge.serve.protocols import scales
    from judge.serve.protocols.base import Reading

    def read(response: str, ref: str | None = REF) -> dict:
        item = {
            "id": "x",
            "task": "SA",
            "question": Q,
            "response": response,
            **({"reference": ref} if ref else {}),
        }
        r = httpx.post(url + "/v1/score", json={"items": [item], "criteria": ["overall"]}, timeout=60)
        return r.json()["results"][0]["scores"]["overall"]

    good, bad = read(R), read("9")
    from lmms_eval.models.model_utils.media_encoder import encode_image_to_base64
    from PIL import Image

    with Image.open(IMAGE) as im:
        jpeg = encode_image_to_base64(im.convert("RGB"), image_format="JPEG", convert_rgb=True, quality=85)
    question = [
        {"type": "text", "text": "Describe the image."},
        {"type": "image", "image": f"data:image/jpeg;base64,{jpeg}"},
    ]

    def read_q(response: str) -> dict:
        item = {"id": "x", "task": "SA", "question": question, "response": response}
        r = httpx.post(url + "/v1/score", json={"items": [item], "criteria": ["overall"]}, timeout=60)
        return r.json()["results"][0]["scores"]["overall"]

    plain_good, plain_bad = read(R, None), read("9", None)
    g = Reading(good["score"], 0, 6)

    class _R:
        def __init__(self, d: dict):
            self.__dict__.update({"raw_score": None, "id": "x", **d})

    pref = record_preference(_R(good), _R(bad), list(range(7))).p_first_better
    p = Reading(plain_good["score"], 0, 6)
    return [
        scales.integer_scale(g, 1, 5),
        scales.preference_verdict(pref, ties=False),
        scales.grade(g, partial=False),
        scales.grade(g, partial=False),
        scales.grade(g, partial=False),
        int(scales.binary(g)),
        {"accuracy": scales.integer_scale(p, 1, 10)},
        (
            float(scales.integer_scale(p, 1, 10)),
            float(scales.integer_scale(Reading(plain_bad["score"], 0, 6), 1, 10)),
        ),
        scales.integer_scale(p, 0, 10) / 10,
        round(scales.point(p, 0, 10) / 10, 4),
        scales.preference_verdict(
            record_preference(
                _R(read_q("Nothing.")), _R(read_q("A red square.")), list(range(7))
            ).p_first_better,
            ties=False,
        ),
        float(scales.integer_scale(p, 1, 10)),
        # ragas, phoenix (the item with its reference)
        int(scales.binary(g)),
        scales.integer_scale(g, 0, 5),
        float(scales.binary(g)),
        "422",
        "correct" if scales.binary(g) else "incorrect",
        "relevant" if scales.binary(g) else "irrelevant",
        "grounded" if scales.binary(g) else "hallucinated",
        "correct" if scales.binary(g) else "incorrect",
        # the request shapes, on the judge's own prompt (the same item)
        scales.point(g, 0, 1),
        scales.integer_scale(g, 1, 5),
        scales.binary(g),
        "correct" if scales.binary(g) else "incorrect",
        "422",
        round(good["score"], 4),
        "correct" if scales.binary(g) else "incorrect",
        "200 greedy (temperature 0.01, top_p 0.1: greedy decoding, temperature at most 0.01)",
        "correct" if scales.binary(g) else "incorrect",
        "200",
        "422 scored=-",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-src", type=Path, default=REPO, help="source tree the server runs from")
    ap.add_argument("--server-label", default=None, help="what the server's code is, for the JSON (a commit)")
    ap.add_argument("--call-timeout", type=float, default=240.0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "protocol_clients_cpu.json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url, proc = start(args.server_src.resolve(), Path(tmp) / "serve.log")
        ref_url, ref_proc = (
            (url, None) if args.server_src.resolve() == REPO else start(REPO, Path(tmp) / "ref.log")
        )
        try:
            want = wanted(ref_url)
            rows = []
            for (tool, package, call, fn), w in zip(calls(url), want, strict=True):
                got, took = bounded(fn, args.call_timeout)
                got = list(got) if isinstance(got, tuple) else got
                w = list(w) if isinstance(w, tuple) else w
                rows.append({"tool": tool, "version": importlib.metadata.version(package), "call": call,
                             "returned": got, "judge_mapped": w, "equal": got == w, "seconds": round(took, 1)})  # fmt: skip
        finally:
            for p in (proc, ref_proc):
                if p is not None:
                    p.terminate()
                    p.wait(60)
    print(f"server code: {args.server_src}")
    print(f"{'tool':<16} {'version':<9} {'call':<42} {'returned':<28} {'judge, mapped':<22} {'s':>6}")
    for r in rows:
        print(f"{r['tool']:<16} {r['version']:<9} {r['call']:<42} {str(r['returned'])[:28]:<28} "
              f"{str(r['judge_mapped'])[:22]:<22} {r['seconds']:>6}")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        **run_facts("protocol_clients.py", argv),
        "server_src": str(args.server_src),
        "server_label": args.server_label or "this checkout",
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
