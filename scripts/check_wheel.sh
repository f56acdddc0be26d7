#!/usr/bin/env bash
# Install judge the way a user does (a wheel, not an editable checkout) into a fresh virtual environment,
# then run the commands from a folder outside the checkout: the shipped rubrics and run configs must come
# from the package itself, and the console scripts must work.
#   bash scripts/check_wheel.sh            (CI runs it; about two minutes, mostly installing dependencies)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

python3 -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$work/dist" "$repo"
wheel=$(ls "$work"/dist/judge-*.whl)
python3 -m venv "$work/venv"
# torch pinned first: 2.13.0 is the CPU build on this machine's disk (any other request may pull CUDA).
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check torch==2.13.0 "$wheel"
# Read the wheel with zipfile, not `unzip -l | grep -q`: under pipefail, grep -q quitting at the first match
# kills unzip with SIGPIPE and the check fails at random (it did in CI).
"$work/venv/bin/python" - "$wheel" <<'PY'
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
wanted = [f"judge/rubrics/{n}.yaml" for n in ("mmie", "rubric6", "demo")] + ["judge/py.typed"]
wanted += [f"judge/view/assets/{n}" for n in ("index.html", "app.js", "style.css")]
missing = [f for f in wanted if f not in names]
if missing:
    sys.exit(f"the wheel lacks {', '.join(missing)}")
PY

mkdir "$work/elsewhere" && cd "$work/elsewhere"
bin="$work/venv/bin"
cp -r "$repo/examples/predictions" preds
cp -r "$repo/annotations/demo" demo
set -x
"$bin/judge-data" rubric show mmie >out.rubric && head -n 1 out.rubric  # no pipe into head: see above
"$bin/judge-data" rubric show rubric6 >/dev/null 2>&1 && exit 1  # a run config is no rubric: must fail
"$bin/judge-data" build --config rubric6 --no-tokens --set "data.annotations=[demo/annotations.jsonl]" --out out/r6 | tail -n 1
"$bin/judge-score" preds/mmra/predictions.jsonl --no-judge --out out/mmra --no-progress | tail -n 2
"$bin/judge-score" preds/canonical.jsonl --judge tiny --rubric mmie --limit 3 --out out/canonical --no-progress | tail -n 2
"$bin/judge-train" --config demo --set output_dir=out/train --set "data.annotations=[demo/annotations.jsonl]" \
  --set train.max_steps=2 --set eval.strategy=no --set eval.at_start=false | tail -n 3
test -f out/train/judge/judge_card.json
"$bin/judge-score" out/train/data/splits/test.jsonl --judge out/train/judge --limit 2 --out out/split --no-progress | tail -n 2
"$bin/judge-view" out/split --export out/view | tail -n 1  # its HTML, JS and CSS come from the package
test -f out/view/index.html && test -f out/view/app.js && test -f out/view/data/index.js
set +x
echo "wheel check passed: $(basename "$wheel") installed in a fresh venv works outside the checkout"
