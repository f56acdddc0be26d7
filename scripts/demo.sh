#!/usr/bin/env bash
# The main job on the shipped demo set, from a fresh checkout (after `pip install -e .`):
#   1. validate the demo annotations against the MMIE rubric (summary, agreement, every problem);
#   2. build the judge's SFT dataset from rubrics/rubric6.yaml (split by question, tokenized with the
#      tiny InternVL processor) into runs/demo/data/.
# Later stages (train, score, report) are added here as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The console script, or the module if pip put scripts somewhere off PATH (e.g. ~/.local/bin).
if command -v judge-data >/dev/null; then judge_data=(judge-data); else judge_data=(python3 -m judge.cli); fi

echo "== judge-data validate"
"${judge_data[@]}" validate annotations/demo/annotations.jsonl --rubric mmie

echo
echo "== judge-data build"
"${judge_data[@]}" build --config rubric6.yaml
