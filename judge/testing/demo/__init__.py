"""Synthetic demo annotation set: MMIE-style records with simulated human scores.

``generate_demo(out_dir)`` writes ``annotations.jsonl``, ``images/*.png`` and a
``README.md`` that documents the set. Everything is synthetic and byte-for-byte
deterministic for a given seed: the pictures are flat-colour shapes drawn with PIL,
the texts are templates, and the three "annotators" are the true score plus a fixed
bias and Gaussian noise.

The point of the set is to drive the whole pipeline (validate, aggregate, split,
build SFT data, train, score, report) end to end on a laptop. Scores depend on the
content in a documented and *learnable* way (see ``FACTORS``, ``CRITERION_FORMULAS``
and ``OVERALL_WEIGHTS``), so a tiny judge trained briefly should beat chance; the set
says nothing about how good any judge is on real data.

How a response is made:

1. The responding model (``MODELS``) sets the mean of a latent skill ``q`` in [0, 1]
   (``MODEL_SKILL``); ``q`` is drawn per response.
2. Hidden quality factors, each in [0, 1] with 1 = good, are drawn with
   probabilities that grow with ``q`` (``FACTORS``), and the text and pictures are
   written so that each factor is *visible* in the content (a garbled token, a caption
   that names the wrong colour, a final answer that differs from the reference...).
3. True criterion scores are clipped linear functions of the factors
   (``CRITERION_FORMULAS``); the true overall score is a weighted mean of the family's
   criteria (``OVERALL_WEIGHTS``).
4. Each annotator adds a fixed bias and Gaussian noise to every true score, rounds
   half up and clips to 0..6 (``ANNOTATOR_PROFILES``).

Two failure modes of real multimodal generators are in the set too: *blank pictures* (every picture of a
story or how-to response is a plain white canvas, for any model: nothing in the text predicts it, so a judge
must look at the pictures; the response fails its task, every criterion capped at ``BLANK_CAP``) and, more
often for weaker models, an *off-prompt* response (its text replaced by fluent sentences about everyday
things, ``RAMBLE``; the factors of answering the task are 0, see ``OFF_PROMPT_FAILS``).

The package, by what it owns: :mod:`.spec` (the score model above), :mod:`.pictures` (drawing),
:mod:`.drafts` (a response under construction and what every family writes the same way), :mod:`.scenes`
(the questions and responses of each family, and the off-prompt failure), :mod:`.annotators` (true scores
and the simulated annotators) and :mod:`.writer` (``generate_demo``: the files on disk and their README).
"""

# The names the single module ``judge.testing.demo`` had, so that every import of them keeps working.
from .annotators import RATIONALE_LEADS as RATIONALE_LEADS
from .annotators import true_scores as true_scores
from .drafts import GARBLE_TOKENS as GARBLE_TOKENS
from .drafts import NUM_WORDS as NUM_WORDS
from .drafts import TONE_BREAKS as TONE_BREAKS
from .pictures import CHART_BG as CHART_BG
from .pictures import COLOURS as COLOURS
from .pictures import GRID as GRID
from .pictures import GROUND_HEIGHT as GROUND_HEIGHT
from .pictures import IMAGE_SIZE as IMAGE_SIZE
from .pictures import JARRING_SCENES as JARRING_SCENES
from .pictures import OUTLINE as OUTLINE
from .pictures import OWNED_IMAGE as OWNED_IMAGE
from .pictures import SCENES as SCENES
from .pictures import SHAPES as SHAPES
from .pictures import TABLE_SCENE as TABLE_SCENE
from .scenes import MSR_ITEMS as MSR_ITEMS
from .scenes import MSR_OPENERS as MSR_OPENERS
from .scenes import OFF_PROMPT_FAILS as OFF_PROMPT_FAILS
from .scenes import PBL_INTROS as PBL_INTROS
from .scenes import PBL_PLAN as PBL_PLAN
from .scenes import PBL_STEPS as PBL_STEPS
from .scenes import PBL_TARGETS as PBL_TARGETS
from .scenes import PBL_TIPS as PBL_TIPS
from .scenes import RAMBLE as RAMBLE
from .scenes import SA_EVENTS as SA_EVENTS
from .scenes import SA_FILLERS as SA_FILLERS
from .spec import (
    ANNOTATOR_PROFILES,
    CRITERIA,
    CRITERION_FORMULAS,
    FACTORS,
    FAMILIES,
    MODEL_SKILL,
    MODELS,
    OVERALL_WEIGHTS,
)
from .spec import BLANK_CAP as BLANK_CAP
from .spec import DRAW_P as DRAW_P
from .spec import SCALE_MAX as SCALE_MAX
from .spec import SCALE_MIN as SCALE_MIN
from .spec import SKILL_SD as SKILL_SD
from .writer import generate_demo

__all__ = [
    "ANNOTATOR_PROFILES",
    "CRITERIA",
    "CRITERION_FORMULAS",
    "FACTORS",
    "FAMILIES",
    "MODELS",
    "MODEL_SKILL",
    "OVERALL_WEIGHTS",
    "generate_demo",
]
