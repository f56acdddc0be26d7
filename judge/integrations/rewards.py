"""Rewards from a judge for RL trainers' reward functions: one scorer over a local judge or a server.

:class:`RewardScorer` turns (prompt, completion[, images]) into the judge's item, scores one criterion of
one task family with a loaded :class:`~judge.api.Judge` (the engine ``judge-score`` uses) or a running
``judge-serve`` (:class:`~judge.scoring.remote.JudgeClient`, whose ``/v1/score`` is what ``/get_reward``
uses), and gives the expected score as a reward: raw on the rubric's scale, or scaled to [0, 1]. An item
that cannot be scored gets ``fallback`` (``None`` by default: TRL counts it as NaN, a missing reward).
The TRL and verl adapters (:mod:`judge.integrations.trl`, :mod:`judge.integrations.verl`) are thin faces
over it; there is no second scoring path.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from judge.api import Judge
from judge.core.chat_markup import question_of
from judge.core.errors import ConfigError
from judge.core.rubric import Rubric
from judge.core.schema import ScoreRecord
from judge.scoring.remote import JudgeClient

Scale = Literal["raw", "unit"]


def text_of(content: Any) -> str:
    """The text of a chat message's content (a string, or parts of which the text ones count)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            p.get("text") or "" for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def question_segments(prompt: Any, images: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The judge's question of a prompt: plain text (chat markup, if any, taken off), or a conversation's
    user turns (system turns dropped); image parts or placeholders take ``images`` in order, and images
    beyond them follow the text."""
    pending = list(images)
    out: list[dict[str, Any]] = []

    def image() -> None:
        if pending:
            out.append({"type": "image", "image": pending.pop(0)})

    if isinstance(prompt, str):
        for k, piece in enumerate(question_of(prompt)):
            if k:
                image()
            if piece.strip():
                out.append({"type": "text", "text": piece})
    else:
        for msg in prompt or ():
            if not isinstance(msg, Mapping) or msg.get("role") != "user":
                continue
            content = msg.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for part in parts:
                if isinstance(part, Mapping) and part.get("type") == "image":
                    image()
                elif (
                    isinstance(part, Mapping) and part.get("type") == "text" and part.get("text", "").strip()
                ):
                    out.append({"type": "text", "text": part["text"]})
    out += [{"type": "image", "image": ref} for ref in pending]
    return out


def completion_text(completion: Any) -> str:
    """A completion's text: the string itself, or the content of its assistant messages."""
    if isinstance(completion, str):
        return completion
    return "".join(text_of(m.get("content")) for m in completion or () if isinstance(m, Mapping))


class RewardScorer:
    """Score (question, response) pairs on one criterion of one family, with a local judge or a server.

    ``judge``: a loaded :class:`Judge`, or what :meth:`Judge.load` takes (a judge folder, a model with
    ``rubric``, ``"tiny"``); or ``server``: a ``judge-serve`` URL (``api_key``, default the
    ``JUDGE_API_KEY`` environment variable). ``task``: the task family (default: the rubric's only one);
    ``criterion``: default ``overall``. ``scale``: ``raw`` or ``unit``; ``fallback``: the reward of an item
    that cannot be scored.
    """

    def __init__(
        self,
        judge: Judge | str | Path | None = None,
        *,
        rubric: str | None = None,
        server: str | None = None,
        api_key: str | None = None,
        task: str | None = None,
        criterion: str = "overall",
        scale: Scale = "raw",
        fallback: float | None = None,
        **load_options: Any,
    ):
        if (judge is None) == (server is None):
            raise ConfigError(
                "give either `judge` (a Judge, or a judge to load) or `server` (a judge-serve URL)"
            )
        if scale not in ("raw", "unit"):
            raise ConfigError(f"`scale` {scale!r} must be raw or unit")
        self.client: JudgeClient | None = None
        self.judge: Judge | None = None
        if server is not None:
            self.client = JudgeClient(server, api_key=api_key)
            rub: Rubric = self.client.rubric
        else:
            assert judge is not None
            self.judge = (
                judge if isinstance(judge, Judge) else Judge.load(judge, rubric=rubric, **load_options)
            )
            rub = self.judge.rubric
        self.rubric = rub
        if task is None:
            if len(rub.families) != 1:
                raise ConfigError(
                    f"`task`: say which family of rubric {rub.name!r} to score ({', '.join(rub.families)})"
                )
            task = next(iter(rub.families))
        if task not in rub.families:
            raise ConfigError(
                f"`task` {task!r} is not a family of rubric {rub.name!r} ({', '.join(rub.families)})"
            )
        if criterion not in rub.families[task].criterion_ids:
            raise ConfigError(
                f"`criterion` {criterion!r} is not a criterion of family {task!r} "
                f"({', '.join(rub.families[task].criterion_ids)})"
            )
        self.task, self.criterion, self.scale, self.fallback = task, criterion, scale, fallback

    def records(
        self, items: Sequence[Mapping[str, Any]], root: str | Path | None = None
    ) -> list[ScoreRecord]:
        """The score record of each item (``question``, ``response``, optional ``reference``), in order."""
        full = [{"id": str(i), "task": self.task, **item} for i, item in enumerate(items)]
        if self.client is not None:
            return self.client.score_records(full, criteria=[self.criterion], root=root)
        assert self.judge is not None
        return self.judge.score_records(full, criteria=[self.criterion], root=root)

    def reward(self, record: ScoreRecord) -> float | None:
        if record.score is None:
            return self.fallback
        if self.scale == "raw":
            return float(record.score)
        lo, hi = self.rubric.scale.min, self.rubric.scale.max
        return (float(record.score) - lo) / (hi - lo)

    def rewards(
        self,
        questions: Sequence[list[dict[str, Any]]],
        responses: Sequence[str],
        references: Sequence[str | None] | None = None,
        images: Sequence[Sequence[Any]] | None = None,
    ) -> tuple[list[float | None], list[ScoreRecord]]:
        """Rewards of (question, response) pairs, and their score records. Image segments may hold PIL
        images (what trainers pass), which are written to a temporary folder for the judge to read."""
        with tempfile.TemporaryDirectory(prefix="judge-reward-") as tmp:
            items = []
            for i, (question, response) in enumerate(zip(questions, responses, strict=True)):
                q = [_on_disk(seg, Path(tmp), f"{i}-{k}") for k, seg in enumerate(question)]
                item: dict[str, Any] = {"question": q or [{"type": "text", "text": ""}], "response": response}
                ref = references[i] if references is not None else None
                if isinstance(ref, str) and ref.strip():
                    item["reference"] = ref
                items.append(item)
            recs = self.records(items, root=tmp)
        return [self.reward(r) for r in recs], recs

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _on_disk(seg: dict[str, Any], folder: Path, name: str) -> dict[str, Any]:
    """An image segment whose image is a PIL image (or raw bytes) as one written under ``folder``."""
    if seg.get("type") != "image" or isinstance(seg.get("image"), str):
        return seg
    img = seg["image"]
    path = folder / f"{name}.png"
    if isinstance(img, (bytes, bytearray)):
        path.write_bytes(img)
    elif hasattr(img, "save"):
        img.convert("RGB").save(path, "PNG")
    else:
        raise ConfigError(f"an image must be a path, bytes or a PIL image (got {type(img).__name__})")
    return {"type": "image", "image": str(path)}


__all__ = ["RewardScorer", "completion_text", "question_segments", "text_of"]
