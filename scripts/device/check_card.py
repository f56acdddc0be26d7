"""Print what a judge folder's card says and check that the judge loads (used by gpu_figures.sh)."""

import json
import sys
from pathlib import Path

import torch

from judge.models.card import load_judge

folder = Path(sys.argv[1])
card = json.loads((folder / "judge_card.json").read_text())
print({k: card[k] for k in ("base_model", "finetune", "quantization", "target_format", "outputs")})
print(
    "training",
    {k: card["training"].get(k) for k in ("steps", "seconds", "best_metric", "best_value", "distributed")},
)
print("lora", card["config"]["lora"], "dtype", card["config"]["model"]["dtype"])
print(
    "validation untrained",
    {k: v for k, v in (card["validation"]["untrained"] or {}).items() if k.startswith("overall")},
)
print(
    "validation final",
    {k: v for k, v in (card["validation"]["final"] or {}).items() if k.startswith("overall")},
)
model, _, _ = load_judge(folder, device="cuda" if torch.cuda.is_available() else "cpu")
kinds = sorted({type(m).__name__ for m in model.modules() if "Linear" in type(m).__name__})
print("loads:", type(model).__name__, next(model.parameters()).dtype, "linear kinds:", kinds)
