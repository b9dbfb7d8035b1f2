#!/usr/bin/env bash
# Submit one SPADE round as a chain of Slurm jobs:
#   sample-docs (array) → design (array) → validate (array) → rollout (array)
#   → regret (single, owns the memory) → train (multi-node accelerate launch)
# usage: SPADE_RUN=/shared/runs/x SPADE_MODEL=/models/m SPADE_ROUND=1 ./submit-round.sh
# Round r+1: SPADE_MODEL=$SPADE_RUN/round-00r/checkpoint SPADE_ROUND=r+1 ./submit-round.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
last=$((SPADE_SHARDS - 1))
sub() { sbatch --parsable --export=ALL "$@"; }
docs=$(sub --array=0-$last "$here/sample-docs.sbatch")
design=$(sub --array=0-$last --dependency=afterok:$docs "$here/design.sbatch")
# aftercorr: validate task i starts when design task i is done.
validate=$(sub --array=0-$last --dependency=aftercorr:$design "$here/validate.sbatch")
rollout=$(sub --array=0-$last --dependency=aftercorr:$validate "$here/rollout.sbatch")
regret=$(sub --dependency=afterok:$rollout "$here/regret.sbatch")
train=$(sub --dependency=afterok:$regret "$here/train.sbatch" \
  "$ROUND_DIR/scored.jsonl.zst" "$SPADE_MODEL" "$ROUND_DIR/checkpoint")
echo "round $SPADE_ROUND: docs=$docs design=$design validate=$validate rollout=$rollout regret=$regret train=$train"
