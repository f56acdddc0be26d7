#!/usr/bin/env bash
# The main job on the shipped demo set, from a fresh checkout (after `pip install -e .`):
#   1. validate the demo annotations against the MMIE rubric (summary, agreement, every problem);
#   2. train the demo judge (judge/rubrics/demo.yaml: the tiny local model, trained fully): build the SFT data
#      into runs/demo/data/, train the tiny InternVL model, validate against the annotators while it trains,
#      write runs/demo/judge/; then calibrate it on the validation split (--calibrate: calibrated scores and
#      90% conformal intervals), then fit selective evaluation on the same labels (judge-calibrate
#      --selective: trusted or escalated);
#   3. draw 20% of the test questions at random, every model's response to each, as the "labelled" ones
#      (judge-data sample --by question: pairs of models then have labels on the same questions);
#   4. score the held-out test split with the trained judge (calibrated, with the labels: judge-only,
#      human-only and prediction-powered means side by side) and with the same model untrained;
#   5. report both against the simulated annotators, beside CLIPScore from a tiny random CLIP, with the
#      paired intervals of the differences, the bias analyses, MMIE's measures, the calibration checked on
#      the test split, selective evaluation and the prediction-powered inference check (2,000 random draws);
#   6. audit the trained judge's overall score: blank images, an off-topic response, unrelated text;
#   7. recap the calibration, interval, selective-evaluation and PPI figures (report.json, summary.json),
#      and print the judge-view command that shows the scored items.
# Everything runs on the CPU; nothing is downloaded. How long it takes: `expected` below, and README.md.
#
#   bash scripts/demo.sh                 the demo as README.md describes it
#   bash scripts/demo.sh --quick         100 training steps instead of 300: a quicker look, a weaker judge
#   bash scripts/demo.sh --steps N       N training steps (the demo's own: demo.yaml's train.max_steps)
#   bash scripts/demo.sh --seed N        another training seed (data order); scripts/demo_seeds.py runs three
#   bash scripts/demo.sh --out DIR       write under DIR instead of runs/demo (relative to where you run it)
set -euo pipefail
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# The demo's own training length (judge/rubrics/demo.yaml: train.max_steps) and --quick's.
DEMO_STEPS=300
QUICK_STEPS=100
# Seconds on the 2-core development machine, measured (README.md, "How long the demo takes"): everything but
# the training steps, and one training step.
FIXED_S=100
STEP_S=0.17

usage() { sed -n '/^#   bash/s/^# *//p' "$0"; }
steps="" seed="" out=runs/demo
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) steps=$QUICK_STEPS ;;
    --steps) steps=${2:-}; shift ;;
    --steps=*) steps=${1#*=} ;;
    --seed) seed=${2:-}; shift ;;
    --seed=*) seed=${1#*=} ;;
    --out) out=${2:-}; shift ;;
    --out=*) out=${1#*=} ;;
    -h | --help) usage; exit 0 ;;
    *) echo "error: unknown option '$1'; the options are:" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
for name in steps seed; do
  value=${!name}
  if [[ -n $value && ! $value =~ ^[0-9]+$ ]]; then
    echo "error: --$name takes a whole number, got '$value'" >&2; exit 2
  fi
done
if [[ -n $steps && $steps -lt 2 ]]; then echo "error: --steps must be at least 2, got $steps" >&2; exit 2; fi
if [[ -z $out ]]; then echo "error: --out takes a folder" >&2; exit 2; fi
# --out is relative to where the demo was started; everything else to the repository root.
[[ $out != runs/demo ]] && out=$(realpath -m -- "$out")
cd "$(dirname "$0")/.."

# The console scripts, or the modules if pip put scripts somewhere off PATH (e.g. ~/.local/bin).
cmd() {
  if command -v "judge-$1" >/dev/null; then echo "judge-$1"
  elif [[ $1 == data ]]; then echo "python3 -m judge.cli"
  else echo "python3 -m judge.cli.$1"; fi
}
judge_data=$(cmd data); judge_train=$(cmd train); judge_score=$(cmd score); judge_report=$(cmd report)
judge_audit=$(cmd audit); judge_calibrate=$(cmd calibrate)

train_args=(--config demo --calibrate)
[[ $out != runs/demo ]] && train_args+=(--set "output_dir=$out")
# Evaluated half-way and at the end, as demo.yaml does for its own steps.
[[ -n $steps ]] && train_args+=(--set "train.max_steps=$steps" --set "eval.steps=$(((steps + 1) / 2))")
[[ -n $seed ]] && train_args+=(--set "train.seed=$seed")

# On a busy machine several threads per process stall each other (every op waits for its slowest thread):
# training ran 10 times slower with two threads than with one beside other jobs on a 2-core machine. One
# thread then, unless OMP_NUM_THREADS is set; on a quiet machine torch's default (one per core).
cores=$(nproc 2>/dev/null || echo 1)
load=$(cut -d ' ' -f 1 /proc/loadavg 2>/dev/null || echo 0)
threads_note=""
if [[ -z ${OMP_NUM_THREADS:-} ]] && awk -v l="$load" -v c="$cores" 'BEGIN { exit !(c > 1 && l >= c / 2) }'; then
  export OMP_NUM_THREADS=1
  threads_note=" The machine is busy (load $load on $cores cores): one thread per process."
fi

n_steps=${steps:-$DEMO_STEPS}
expected=$(awk -v f=$FIXED_S -v s=$STEP_S -v n="$n_steps" 'BEGIN { printf "%d", f + s * n }')
quick=$(awk -v f=$FIXED_S -v s=$STEP_S -v n=$QUICK_STEPS 'BEGIN { printf "%d", f + s * n }')
echo "The demo trains $n_steps steps and takes about $expected s on a quiet 2-core CPU (the development machine;"
echo "up to twice that on a slower or busy one). Shorter: bash scripts/demo.sh --quick ($QUICK_STEPS steps, about $quick s:"
echo "every step runs, but the judge has not learned yet) or --steps N. Training prints the time left as it goes.$threads_note"

# Each step's wall time, printed at the end (what the README's demo timings come from).
names=(); starts=()
step() {
  names+=("$1"); starts+=("$EPOCHREALTIME")
  echo; echo "== $1"
}
test_split=$out/data/splits/test.jsonl
labels=$out/data/splits/test-sample20.jsonl

step "judge-data validate"
$judge_data validate annotations/demo/annotations.jsonl --rubric mmie

step "judge-train (then calibrated on the validation split)"
$judge_train "${train_args[@]}"

# The demo judge agrees with the annotators within one point on under half of its scores and prefers their
# preferred response in about 70% of pairs: promised 90% on its 25 validation questions, it escalates
# everything (README). 70% shows the thresholds at work.
step "judge-calibrate --selective: thresholds that keep 70% agreement with the annotators (with probability 90%)"
$judge_calibrate --judge "$out/judge" --scores "$out/judge/calibration/scores.jsonl" --selective \
  --agreement 0.7 --delta 0.1 --no-progress

step "judge-data sample: 20% of the test questions (every model's response to each), at random, as if labelled"
$judge_data sample "$test_split" --fraction 0.2 --by question --seed 0 --out "$labels"

step "judge-score: the trained judge on the test split (calibrated; PPI leaderboard from the 20% labels)"
$judge_score "$test_split" --judge "$out/judge" --out "$out/score" --overwrite --no-progress --labels "$labels"

step "judge-score: the same model untrained"
$judge_score "$test_split" --judge tiny --rubric mmie --out "$out/score-untrained" --overwrite --no-progress

step "judge-report"
$judge_report --human "$test_split" \
  --scores trained="$out/score/scores.jsonl" \
  --scores untrained="$out/score-untrained/scores.jsonl" \
  --clip-model tiny:seed=3 --out "$out/report" \
  --title "Demo judge vs simulated annotators (test split)" \
  --note "A demonstration of the pipeline on synthetic data with randomly initialised small models (a tiny InternVL judge, a tiny random CLIP), not a measure of any real judge."

step "judge-audit: does the trained judge see what the annotators see?"
# The overall score only: what the demo judge was trained on (demo.yaml's data.criteria).
$judge_audit "$test_split" --judge "$out/judge" --out "$out/audit" --overwrite --no-progress \
  --perturb blank-images --perturb off-topic --perturb unrelated-text --criteria overall

step "In brief: calibration, intervals, selective evaluation and prediction-powered means on the test split"
python3 scripts/demo_recap.py "$out/report/report.json" --summary "$out/score/summary.json"

end=$EPOCHREALTIME
echo
echo "== Wall time of each step"
for i in "${!names[@]}"; do
  next=${starts[$((i + 1))]:-$end}
  awk -v a="${starts[$i]}" -v b="$next" -v n="${names[$i]}" 'BEGIN { printf "%7.1f s  %s\n", b - a, n }'
done
awk -v a="${starts[0]}" -v b="$end" -v e="$expected" \
  'BEGIN { t = b - a; printf "%7.1f s  in all (%d min %02d s; about %d s expected)\n", t, t / 60, t % 60, e }'

echo
echo "== Look at what the judge did: each test item beside its scores, the report's plots and the audit"
echo "$(cmd view) $out/score --report $out/report --audit $out/audit"
