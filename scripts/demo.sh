#!/usr/bin/env bash
# The main job on the shipped demo set, from a fresh checkout (after `pip install -e .`):
#   1. validate the demo annotations against the MMIE rubric (summary, agreement, every problem);
#   2. train the demo judge (judge/rubrics/demo.yaml: the tiny local model, trained fully): build the SFT data
#      into runs/demo/data/, train the tiny InternVL model, validate against the annotators while it trains,
#      write runs/demo/judge/; then calibrate it on the validation split and fit selective evaluation on the
#      same labels, in one judge-calibrate --selective (calibrated scores, 90% conformal intervals, trusted or
#      escalated; its tables printed once);
#   3. draw 20% of the test questions at random, every model's response to each, as the "labelled" ones
#      (judge-data sample --by question: pairs of models then have labels on the same questions);
#   4. score the held-out test split with the trained judge (calibrated, with the labels: judge-only,
#      human-only and prediction-powered means side by side) and with the same model untrained;
#   5. report both against the simulated annotators, beside CLIPScore from a tiny random CLIP, with the
#      paired intervals of the differences, the bias analyses, MMIE's measures, the calibration checked on
#      the test split, selective evaluation and the prediction-powered inference check (500 random draws);
#   6. audit the trained judge (the overall score, what it was trained on): blank images, an off-topic
#      response, unrelated text;
#   7. recap the calibration, interval, selective-evaluation and PPI figures (report.json, summary.json),
#      print the judge-view command that shows the scored items, and end with the verdict block: trained vs
#      untrained vs CLIPScore against the annotators' ceiling, the audit's verdicts, what calibration chose
#      and what selective evaluation trusted, read from the files above (judge/view/verdict.py).
# Everything runs on the CPU, in one Python process (scripts/demo.py: each step prints the command it stands
# for); nothing is downloaded. How long it takes: printed at the start, and docs/demo.md.
#
#   bash scripts/demo.sh                 the demo as README.md and docs/demo.md describe it
#   bash scripts/demo.sh --quick         fewer training steps: a quicker look, a weaker judge
#   bash scripts/demo.sh --steps N       N training steps (the demo's own: demo.yaml's train.max_steps)
#   bash scripts/demo.sh --seed N        another training seed (data order); scripts/demo_seeds.py runs three
#   bash scripts/demo.sh --out DIR       write under DIR instead of runs/demo (relative to where you run it)
set -euo pipefail

# On a busy machine several threads per process stall each other (every op waits for its slowest thread):
# training ran 10 times slower with two threads than with one beside other jobs on a 2-core machine. One
# thread then, unless OMP_NUM_THREADS is set; on a quiet machine torch's default (one per core). Busy: other
# processes used at least half of the CPUs over the last half second (/proc/stat; the load average would
# still count a run that has just ended).
cpu_busy() {
  local a b
  a=$(head -n 1 /proc/stat 2>/dev/null) || return 1
  sleep 0.5
  b=$(head -n 1 /proc/stat 2>/dev/null) || return 1
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x, " "); split(b, y, " ")
    for (i = 2; i <= n; i++) { t += y[i] - x[i] }
    idle = (y[5] - x[5]) + (y[6] - x[6])
    exit !(t > 0 && (t - idle) / t >= 0.5)
  }'
}
cores=$(nproc 2>/dev/null || echo 1)
if [[ -z ${OMP_NUM_THREADS:-} && $cores -gt 1 ]] && cpu_busy; then
  export OMP_NUM_THREADS=1
  export JUDGE_DEMO_BUSY=1  # scripts/demo.py's opening then says to expect longer
  echo "The machine is busy (other processes use half of its $cores cores or more): one thread per process."
fi
exec python3 "$(dirname "$0")/demo.py" "$@"
