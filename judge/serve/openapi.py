"""The request bodies of ``judge-serve`` and their OpenAPI description (``GET /openapi.json``).

The routes read their JSON bodies themselves, so that every refusal names the field in the request's
own terms (``items[2] (id 'q7'): field 'task': ...``). :class:`ScoreRequest` validates ``/v1/score``'s
envelope; the items and the chat body are checked by the routes, and the other models here only describe
them for clients, code generators and the fuzz tests (schemathesis).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from judge.core.schema import PredictionRecord
from judge.serve.reward import RewardRequest


class MmieSegment(BaseModel):
    """One piece of MMIE's native content: text, then an image, either of which may be null."""

    text: str | None = None
    image: str | None = Field(None, description="a base64 data URL, or a path under --image-root")


class MmieItem(BaseModel):
    """An item in MMIE's native form: ``answer`` is the response and ``gt_answer`` the reference; the task
    (SA, PBL, MSR) comes from the id when not given. Other fields are kept under ``meta``."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    question: str | list[MmieSegment]
    answer: str | list[MmieSegment] | None
    gt_answer: str | list[MmieSegment] | None = None
    model: str = "unknown"
    task: str | SkipJsonSchema[None] = Field(None, description="default: SA, PBL or MSR, from the id")


class ScoreRequest(BaseModel):
    """``POST /v1/score``: the items (each read by the route as a record file's line is, so its errors name
    ``items[i]`` and the field), the criteria, a deadline."""

    model_config = ConfigDict(extra="forbid")

    items: list[Any] = Field(
        description="items in the canonical prediction form (ScoreItem: a PredictionRecord whose `benchmark` "
        "may be left out) or MMIE's (MmieItem)"
    )
    criteria: Literal["all"] | Annotated[list[str], Field(min_length=1)] | None = Field(
        None,
        description='left out: the criteria the judge was trained on (its card\'s data.criteria); "all", or a '
        "non-empty list of criterion ids: those, each one the judge was not trained on marked `trained: false`",
    )
    timeout: float | None = Field(None, gt=0, description="seconds; shortens the server's --timeout-s")

    @field_validator("criteria", mode="before")
    @classmethod
    def _criteria(cls, v: Any) -> Any:
        if v == "all" or (isinstance(v, list) and v and all(isinstance(c, str) for c in v)):
            return v
        raise ValueError(f'must be "all" or a non-empty list of criterion ids, got {v!r}'[:200])


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ImageUrl(BaseModel):
    url: str = Field(description="a base64 data URL, or a path under --image-root; nothing is fetched")
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(BaseModel):
    type: Literal["image_url"]
    image_url: ImageUrl | str


class ChatMessage(BaseModel):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart | ImagePart]


class JsonSchema(BaseModel):
    name: str | None = None
    schema_: dict[str, Any] = Field(
        alias="schema",
        description="an object schema with one score property (number, integer, boolean or labels such as "
        "correct/incorrect) and otherwise strings; filled from the judge's reading (docs/serving.md)",
    )
    strict: bool | None = None


class ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"] = Field(
        description="text; json_object or json_schema only for a scored reply (the judge's own prompt or a "
        "tool's grading prompt it recognises); generated text is not held to a format (422)"
    )
    json_schema: JsonSchema | None = None


class StreamOptions(BaseModel):
    include_usage: bool | None = None


class ChatCompletionRequest(BaseModel):
    """``POST /v1/chat/completions``, OpenAI's shape. ``tools`` with a ``tool_choice`` forcing one function are
    answered with a tool call (the judge's reading in its arguments); other uses of tools, ``functions``,
    ``logit_bias`` and non-zero ``frequency_penalty``/``presence_penalty`` are refused (422): nothing the server
    cannot honour is ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="the served id (GET /v1/models)")
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, description="0, at most 0.01, or absent: decoding is greedy")
    top_p: float | None = Field(None, ge=0, le=1)
    n: int | None = Field(None, ge=1, le=1)
    stream: bool | None = Field(
        None, description="true: the reply as server-sent events (chat.completion.chunk objects, then [DONE])"
    )
    stream_options: StreamOptions | None = Field(None, description="with stream: a final usage chunk")
    stop: str | list[str] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    seed: int | None = None
    response_format: ResponseFormat | None = None
    timeout: float | None = Field(None, gt=0, description="seconds; shortens the server's --timeout-s")


class InputText(BaseModel):
    type: Literal["input_text", "output_text"]
    text: str


class InputImage(BaseModel):
    type: Literal["input_image"]
    image_url: str = Field(description="a base64 data URL, or a path under --image-root; nothing is fetched")
    detail: Literal["auto", "low", "high", "original"] | None = None


class InputMessage(BaseModel):
    type: Literal["message"] | None = None
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[InputText | InputImage]


class TextFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(
        None, alias="schema", description="for json_schema (docs/serving.md)"
    )
    strict: bool | None = None


class TextConfig(BaseModel):
    format: TextFormat | None = None


class FunctionTool(BaseModel):
    type: Literal["function"]
    name: str
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ResponsesRequest(BaseModel):
    """``POST /v1/responses``, OpenAI's Responses API, answered as the same chat completion would be; fields
    it cannot honour (stored responses, hosted tools, reasoning, unknown fields) are refused (422)."""

    model: str = Field(description="the served id (GET /v1/models)")
    input: str | list[InputMessage] = Field(min_length=1)
    instructions: str | None = Field(None, description="a system message before the input")
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, description="0, at most 0.01, or absent: decoding is greedy")
    top_p: float | None = Field(None, ge=0, le=1)
    text: TextConfig | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["required"] | dict[str, Any] | None = Field(
        None, description="{'type': 'function', 'name': N}, or 'required' with one tool"
    )
    stream: bool | None = Field(None, description="true: the reply as the Responses API's server-sent events")
    store: Literal[False] | None = None
    timeout: float | None = Field(None, gt=0, description="seconds; shortens the server's --timeout-s")


#: route -> the model of its request body
BODIES: dict[str, type[BaseModel]] = {
    "/v1/score": ScoreRequest,
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/responses": ResponsesRequest,
    "/get_reward": RewardRequest,
    "/v1/reward": RewardRequest,
}


def _score_item_schema() -> dict[str, Any]:
    """A canonical item is a PredictionRecord whose ``benchmark`` may be left out (the rubric's name)."""
    schema = PredictionRecord.model_json_schema(ref_template="#/components/schemas/{model}")
    schema["required"] = [f for f in schema.get("required", []) if f != "benchmark"]
    schema["title"] = "ScoreItem"
    return schema


def components(served: str | None = None, families: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Every schema the request bodies refer to, by name, for ``components.schemas``; with the served model
    id (the one ``model`` a chat request may name) and the rubric's task families (examples of ``task``)."""
    out: dict[str, dict[str, Any]] = {}
    item = _score_item_schema()
    out.update(item.pop("$defs", {}))
    out["ScoreItem"] = item
    models: list[type[BaseModel]] = [MmieItem, *dict.fromkeys(BODIES.values())]
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    # Each item in either form (described here, not validated by pydantic: the route reads items itself).
    forms = [{"$ref": "#/components/schemas/ScoreItem"}, {"$ref": "#/components/schemas/MmieItem"}]
    out["ScoreRequest"]["properties"]["items"].update(items={"anyOf": forms}, minItems=1)
    if served is not None:
        out["ChatCompletionRequest"]["properties"]["model"]["enum"] = [served]
        out["ResponsesRequest"]["properties"]["model"]["enum"] = [served]
    if families:
        out["ScoreItem"]["properties"]["task"]["examples"] = list(families)
    return out


def request_body(route: str) -> dict[str, Any]:
    """The ``requestBody`` of ``route``'s operation, for FastAPI's ``openapi_extra``."""
    name = BODIES[route].__name__
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    }


__all__ = ["BODIES", "components", "request_body"]
