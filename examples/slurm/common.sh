# Shared settings for the Slurm recipes; sourced by every job script.
# Edit these (or export them before `submit-round.sh`).
: "${SPADE_RUN:=$PWD/runs/slurm}"            # run directory on a shared filesystem
: "${SPADE_MODEL:=Qwen/Qwen3-30B-A3B}"       # local path or hub name visible to every node
: "${SPADE_CORPUS:=/data/corpus/*.jsonl.zst}" # corpus shards
: "${SPADE_ROUND:=1}"
: "${SPADE_SEED:=0}"
: "${SPADE_SHARDS:=8}"                       # array size of the map stages
: "${SPADE_TP:=4}"                           # vLLM tensor parallel size per generation job
ROUND_DIR=$SPADE_RUN/round-$(printf %03d "$SPADE_ROUND")
SEED=$((SPADE_SEED * 1000 + SPADE_ROUND))
mkdir -p "$ROUND_DIR"
set -euo pipefail
