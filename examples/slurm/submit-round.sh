#!/usr/bin/env bash
# Submit one SPADE round as a chain of Slurm jobs, one per stage of the round that
# `spade-loop CONFIG --list-stages --round R` lists; map stages (design, validate,
# rollout) run as array jobs of SHARDS tasks followed by a merge job. Each job runs
# stage.sbatch, which runs `spade-loop CONFIG --stage NAME`.
#
#   examples/slurm/submit-round.sh CONFIG ROUND [SHARDS]
set -euo pipefail
config=${1:?usage: submit-round.sh CONFIG ROUND [SHARDS]}
round=${2:?usage: submit-round.sh CONFIG ROUND [SHARDS]}
shards=${3:-1}
here=$(cd "$(dirname "$0")" && pwd)
export SPADE_CONFIG=$(realpath "$config") SPADE_ROUND=$round
prev=""
summary=()
sub() {  # sub NAME [sbatch args...]: submit stage.sbatch, print the job id
  local name=$1; shift
  sbatch --parsable --kill-on-invalid-dep=yes --job-name "spade-r$round-$name" \
    ${prev:+--dependency=afterok:$prev} "$@" "$here/stage.sbatch"
}
while IFS=$'\t' read -r name shardable; do
  if [ "$shardable" = true ] && [ "$shards" -gt 1 ]; then
    array=$(sub "$name" --array="0-$((shards - 1))" --export="ALL,SPADE_STAGE=$name,SPADE_SHARDS=$shards")
    prev=$array
    prev=$(sub "$name-merge" --export="ALL,SPADE_STAGE=$name,SPADE_MERGE=$shards")
  else
    prev=$(sub "$name" --export="ALL,SPADE_STAGE=$name")
  fi
  summary+=("$name=$prev")
done < <(spade-loop "$SPADE_CONFIG" --list-stages --round "$round" | jq -r '[.name, .shardable] | @tsv')
echo "round $round: ${summary[*]}"
