#!/usr/bin/env bash
# The main job on the shipped demo set, from a fresh checkout (after `pip install -e .`):
#   1. validate the demo annotations against the MMIE rubric (summary, agreement, every problem);
#   2. build the judge's SFT dataset from rubrics/rubric6.yaml (split by question, tokenized with the
#      tiny InternVL processor) into runs/demo/data/.
# Later stages (train, score, report) are added here as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

echo "== judge-data validate"
judge-data validate annotations/demo/annotations.jsonl --rubric mmie

echo
echo "== judge-data build"
judge-data build --config rubric6.yaml
