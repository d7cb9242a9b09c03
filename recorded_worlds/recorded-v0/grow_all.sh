#!/usr/bin/env bash
# The exact commands that grew the shipped worlds (built-in agents, no LLM, W=4, 150 attempts each).
# Run from the repository root: bash recorded_worlds/recorded-v0/grow_all.sh [NAME ...]  (default: all).
set -euo pipefail
GROW=".venv/bin/dream-gym grow --workers 4 --rounds 200 --max-attempts 150 --beta 0.5 --quiet"
FIXED="--policy fixed --policy-arg branches=10 --policy-arg depth=15"
GREEDY="--policy greedy --policy-arg min_branches=3 --policy-arg patience=1000"
RND="--policy random --policy-arg p_stop=0"
UCB="--policy ucb --policy-arg rounds=1000 --policy-arg patience=1000"
SHINKA="--policy shinka --policy-arg rounds=1000 --policy-arg patience=1000"

declare -A WORLDS=(
  [sd-fixed-s0]="--task sum-difference $FIXED --seed 0"
  [sd-fixed-s1]="--task sum-difference $FIXED --seed 1"
  [sd-greedy-s0]="--task sum-difference $GREEDY --seed 0"
  [sd-greedy-s1]="--task sum-difference $GREEDY --seed 1"
  [sd-random-s0]="--task sum-difference $RND --seed 0"
  [sd-random-s1]="--task sum-difference $RND --seed 1"
  [sd-ucb-s0]="--task sum-difference $UCB --seed 0"
  [sd-ucb-s1]="--task sum-difference $UCB --seed 1"
  [sd-shinka-s0]="--task sum-difference $SHINKA --seed 0"
  [lasso-fixed-s0]="--task lasso-path $FIXED --seed 0"
  [lasso-fixed-s1]="--task lasso-path $FIXED --seed 1"
  [lasso-greedy-s0]="--task lasso-path $GREEDY --seed 0"
  [lasso-greedy-s1]="--task lasso-path $GREEDY --seed 1"
  [lasso-random-s0]="--task lasso-path $RND --seed 0"
  [lasso-random-s1]="--task lasso-path $RND --seed 1"
  [lasso-ucb-s0]="--task lasso-path $UCB --seed 0"
  [lasso-ucb-s1]="--task lasso-path $UCB --seed 1"
  [lasso-shinka-s0]="--task lasso-path $SHINKA --seed 0"
  [cp26-fixed-s0]="--task circle-packing-26 $FIXED --seed 0"
  [cp26-greedy-s0]="--task circle-packing-26 $GREEDY --seed 0"
  [cp26-random-s0]="--task circle-packing-26 $RND --seed 0"
  [cp32-fixed-s0]="--task circle-packing-32 $FIXED --seed 0"
  [cp32-ucb-s0]="--task circle-packing-32 $UCB --seed 0"
  [cp32-random-s0]="--task circle-packing-32 $RND --seed 0"
)
ORDER=(sd-fixed-s0 sd-fixed-s1 sd-greedy-s0 sd-greedy-s1 sd-random-s0 sd-random-s1 sd-ucb-s0 sd-ucb-s1 sd-shinka-s0
       lasso-fixed-s0 lasso-fixed-s1 lasso-greedy-s0 lasso-greedy-s1 lasso-random-s0 lasso-random-s1 lasso-ucb-s0
       lasso-ucb-s1 lasso-shinka-s0 cp26-fixed-s0 cp26-greedy-s0 cp26-random-s0 cp32-fixed-s0 cp32-ucb-s0
       cp32-random-s0)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ORDER[@]}")
for name in "${names[@]}"; do
  [ -f "recorded_worlds/recorded-v0/$name/world.json" ] && grep -q sha256 "recorded_worlds/recorded-v0/$name/world.json" && continue
  resume=""; [ -f "recorded_worlds/recorded-v0/$name/nodes.jsonl" ] && resume="--resume"
  start=$(date +%s)
  # shellcheck disable=SC2086
  $GROW ${WORLDS[$name]} --out "recorded_worlds/recorded-v0/$name" $resume
  echo "$name $(( $(date +%s) - start ))s" >> recorded_worlds/recorded-v0/grow_times.txt
done
