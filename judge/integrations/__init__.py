"""The judge where it is used: reward functions for RL trainers (TRL's GRPO, verl), over a local judge or a
running ``judge-serve``. OpenRLHF needs no adapter: it calls ``judge-serve``'s ``/get_reward`` itself.
See ``docs/integrations.md``."""

from judge.integrations.rewards import RewardScorer
from judge.integrations.trl import reward_function

__all__ = ["RewardScorer", "reward_function"]
