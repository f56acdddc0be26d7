#!/usr/bin/env bash
# Sharded training on a machine with one GPU: FSDP2 and DeepSpeed ZeRO-2 / ZeRO-3, with the shipped
# configs/accelerate/{fsdp,deepspeed_zero2,deepspeed_zero3}.yaml, full fine-tuning and LoRA of the tiny judge,
# validation on; every judge written is reloaded and must score as its card says (check_sharded_training.py).
#
#   bash scripts/device/check_sharded_training.sh [OUT_DIR]      (from anywhere; default /tmp/judge-sharded-check)
#
# Without network: put wheels of what the machine lacks in .whl/ at the repository root, or in the folder
# JUDGE_WHEELS names (for DeepSpeed: DS_BUILD_OPS=0 pip wheel --no-deps deepspeed -w .whl, and
# pip download --no-deps hjson -d .whl); they are installed into a temporary folder that goes first on
# PYTHONPATH. Takes about 2-3 minutes on an H100.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/judge-sharded-check}
site=$(mktemp -d /tmp/judge-site.XXXXXX)
wheels=${JUDGE_WHEELS:-.whl}
if compgen -G "$wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
python3 scripts/device/check_sharded_training.py "$out"
