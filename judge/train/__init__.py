"""Training a judge: the run config, the collator, validation against humans, the trainer wrapper."""

from judge.train.config import RunConfig, load_run_config
from judge.train.trainer import TrainResult, train_judge

__all__ = ["RunConfig", "TrainResult", "load_run_config", "train_judge"]
