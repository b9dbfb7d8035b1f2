#!/usr/bin/env bash
# Submit one SPADE round as a chain of Slurm jobs, one per stage that
# `spade-loop CONFIG --list-stages --round R` lists. Map stages (design, validate,
# rollout) run as array jobs of SHARDS tasks followed by a merge job. Every job runs
# stage.sbatch, i.e. `spade-loop CONFIG --stage NAME --round R [--shard i/n | --merge n]`,
# so the round is exactly the one spade-loop runs, with every setting from CONFIG.
#
#   examples/slurm/submit-round.sh [--from STAGE] [--through LAST] [--wait] CONFIG ROUND [SHARDS]
#
#   --from STAGE   resume: submit STAGE and the stages after it (the earlier ones are done)
#   --through LAST submit rounds ROUND..LAST as one chain: each round's first stage waits
#                  for the round before it (its checkpoint is the next round's model)
#   --wait         wait for the chain; exit 0 when the round is done, else with the
#                  failing stage's exit code, after a summary of what failed and was cancelled
#
# Each job depends on the one before it (afterok) and is submitted with
# --kill-on-invalid-dep=yes: when a stage fails or is cancelled, Slurm cancels every job
# after it instead of leaving them pending on DependencyNeverSatisfied. Resume with
# --from NAME; stages the round's manifest marks done are skipped, a rerun shard starts
# afresh (stage outputs are written under a temporary name and renamed when complete).
#
# Environment:
#   SPADE_VENV              virtualenv with spade installed, activated by every job
#                           (default: the active one, $VIRTUAL_ENV; else PATH as it is)
#   SPADE_PROFILE           cpu (default: Slurm's defaults, one CPU per task) or gpu
#                           (one GPU for the model stages, $SPADE_GPUS per train node)
#   SPADE_SBATCH            extra sbatch arguments for every job (--partition, --account)
#   SPADE_SBATCH_<STAGE>    extra sbatch arguments for one stage, upper case with _ for -:
#                           SPADE_SBATCH_ROLLOUT="-c 8 --mem=32G --time=2:00:00"
#   SPADE_SLURM_LOGS        job logs directory (default: the round's dir/slurm-logs)
# Prints `round R: NAME=JOBID ...` on stdout, a line per round. Exit codes: 0 submitted
# (or, with --wait, done), 2 usage, the sbatch's or the failing stage's code otherwise.
set -euo pipefail
usage="usage: submit-round.sh [--from STAGE] [--through LAST] [--wait] CONFIG ROUND [SHARDS]"
from="" wait=0 through=""
while [ $# -gt 0 ]; do
  case "$1" in
    --from) from=${2:?$usage}; shift 2 ;;
    --from=*) from=${1#--from=}; shift ;;
    --through) through=${2:?$usage}; shift 2 ;;
    --through=*) through=${1#--through=}; shift ;;
    --wait) wait=1; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    --*) echo "submit-round: unknown option $1; $usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "$usage" >&2; exit 2; }
config=$1 round=$2 shards=${3:-1}
[[ $round =~ ^[1-9][0-9]*$ ]] || { echo "submit-round: ROUND must be a positive integer, got '$round'" >&2; exit 2; }
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "submit-round: SHARDS must be a positive integer, got '$shards'" >&2; exit 2; }
through=${through:-$round}
[[ $through =~ ^[1-9][0-9]*$ ]] && [ "$through" -ge "$round" ] \
  || { echo "submit-round: --through must be a round at or after $round, got '$through'" >&2; exit 2; }
[ -f "$config" ] || { echo "submit-round: $config: no such config file" >&2; exit 2; }
case "${SPADE_PROFILE:=cpu}" in cpu|gpu) ;; *) echo "submit-round: SPADE_PROFILE must be cpu or gpu, got '$SPADE_PROFILE'" >&2; exit 2 ;; esac

here=$(cd "$(dirname "$0")" && pwd)
SPADE_VENV=${SPADE_VENV:-${VIRTUAL_ENV:-}}
if [ -n "$SPADE_VENV" ]; then
  [ -x "$SPADE_VENV/bin/spade-loop" ] || { echo "submit-round: SPADE_VENV=$SPADE_VENV has no bin/spade-loop" >&2; exit 2; }
  PATH=$SPADE_VENV/bin:$PATH
fi
command -v spade-loop >/dev/null || { echo "submit-round: spade-loop not found: set SPADE_VENV or PATH" >&2; exit 2; }
export SPADE_CONFIG SPADE_VENV
SPADE_CONFIG=$(realpath "$config")

list_stages() { spade-loop "$SPADE_CONFIG" --list-stages --round "$1" -q; }
if [ -n "$from" ]; then
  first=$(list_stages "$round")
  if ! jq -r .name <<<"$first" | grep -qxF -- "$from"; then
    echo "submit-round: round $round has no stage '$from'; it has $(jq -r .name <<<"$first" | paste -sd' ')" >&2
    exit 2
  fi
fi

resources() {  # resources STAGE NODES: the profile's sbatch arguments for a stage
  local stage=$1 nodes=$2 var
  if [ "$nodes" -gt 1 ]; then echo "--nodes=$nodes --ntasks-per-node=1"; fi
  if [ "$SPADE_PROFILE" = gpu ]; then
    case "$stage" in
      design|rollout|eval) echo "--gpus-per-node=1 --cpus-per-task=8" ;;
      train) echo "--gpus-per-node=${SPADE_GPUS:-1} --cpus-per-task=16" ;;
      validate) echo "--cpus-per-task=8" ;;
    esac
  fi
  echo "${SPADE_SBATCH:-}"
  var=SPADE_SBATCH_$(tr 'a-z-' 'A-Z_' <<<"$stage")
  echo "${!var:-}"
}

names=() ids=() of_round=() prev=""
cancel_submitted() {
  if [ ${#ids[@]} -gt 0 ]; then
    scancel "${ids[@]}" 2>/dev/null || true
    echo "submit-round: cancelled the jobs already submitted: ${ids[*]}" >&2
  fi
}
sub() {  # sub NAME JOBNAME [sbatch args...]: submit stage.sbatch, remember its job id
  local name=$1 job=$2 out id status=0; shift 2
  local -a extra
  # The user's sbatch arguments split on blanks, never globbed.
  read -ra extra <<<"$(resources "$name" "${nodes:-1}" | tr '\n' ' ')"
  out=$(sbatch --parsable --kill-on-invalid-dep=yes --job-name "spade-r$r-$job" \
    ${prev:+--dependency=afterok:$prev} "$@" "${extra[@]}" "$here/stage.sbatch" 2>&1) || status=$?
  id=${out%%;*}
  if [ $status -ne 0 ] || ! [[ $id =~ ^[0-9]+$ ]]; then
    echo "submit-round: sbatch rejected stage $job: $out" >&2
    [ ${#names[@]} -gt 0 ] && echo "submit-round: submitted before it: ${names[*]}" >&2
    cancel_submitted
    exit $((status ? status : 1))
  fi
  names+=("$job=$id") ids+=("$id") of_round+=("$r") prev=$id
}

for ((r = round; r <= through; r++)); do
  stages=$(list_stages "$r")
  rdir=$(jq -r '.dir' <<<"$stages" | head -1)
  logs=${SPADE_SLURM_LOGS:-$rdir/slurm-logs}
  mkdir -p "$logs"
  start=${#names[@]}
  started=$([ -z "$from" ] || [ "$r" -gt "$round" ] && echo 1 || echo 0)
  while IFS=$'\t' read -r name shardable nodes; do
    [ "$name" = "$from" ] && started=1
    [ "$started" = 1 ] || continue
    export_="ALL,SPADE_ROUND=$r,SPADE_STAGE=$name"
    if [ "$shardable" = true ] && [ "$shards" -gt 1 ]; then
      sub "$name" "$name" --array="0-$((shards - 1))" --output="$logs/%x-%A_%a.out" \
        --export="$export_,SPADE_SHARDS=$shards,SPADE_MERGE="
      sub "$name" "$name-merge" --output="$logs/%x-%j.out" \
        --export="$export_,SPADE_SHARDS=,SPADE_MERGE=$shards"
    else
      sub "$name" "$name" --output="$logs/%x-%j.out" --export="$export_,SPADE_SHARDS=,SPADE_MERGE="
    fi
  done < <(jq -r '[.name, .shardable, .nodes] | @tsv' <<<"$stages")
  echo "round $r: ${names[*]:$start}"
done
echo "submit-round: logs in ${SPADE_SLURM_LOGS:-round-NNN/slurm-logs}; watch with: squeue -j $(IFS=,; echo "${ids[*]}")" >&2
[ "$wait" = 1 ] || exit 0

# --wait: poll until no job of the chain is pending or running. A job's final state is
# kept when first seen: slurmctld forgets finished jobs after MinJobAge (300 s by default);
# sacct answers for a job already forgotten where accounting is on.
job_lines() {
  local out
  out=$(scontrol show job -o "$1" 2>/dev/null) || out=""
  if [ -z "$out" ] && command -v sacct >/dev/null; then
    out=$(sacct -n -X -P -j "$1" -o JobID,State,ExitCode 2>/dev/null \
      | awk -F'|' '{split($1, a, "_"); print "JobId=" $1 " ArrayTaskId=" a[2] " JobState=" $2 " Reason=None ExitCode=" $3}')
  fi
  printf '%s\n' "$out"
}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
declare -A final=()
while :; do
  active=0
  for id in "${ids[@]}"; do
    [ -n "${final[$id]:-}" ] && continue
    lines=$(job_lines "$id")
    if grep -qE 'JobState=(PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|REQUEUED|RESIZING|REQUEUE_HOLD)' <<<"$lines"; then
      active=1
    else
      final[$id]=${lines:-JobId=$id JobState=UNKNOWN ExitCode=1:0}
    fi
  done
  [ $active = 0 ] && break
  sleep "${SPADE_WAIT_POLL:-2}"
done
code=0 failed="" failed_round="" log="" also=() cancelled=()
for i in "${!ids[@]}"; do
  name=${names[$i]%=*}
  [ "$through" -gt "$round" ] && name="r${of_round[$i]}/$name"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    state=$(field JobState "$line")
    [ "$state" = COMPLETED ] && continue
    task=$(field ArrayTaskId "$line")
    if [ "$(field Reason "$line")" = DependencyNeverSatisfied ]; then
      cancelled+=("$name")
    elif [ -z "$failed" ]; then
      exit_code=$(field ExitCode "$line"); exit_code=${exit_code%%:*}
      code=$(( exit_code > 0 ? exit_code : 1 ))
      log=$(field StdOut "$line")
      failed="stage $name${task:+ task $task} ended $state (exit $exit_code); log: $log"
      failed_round=${of_round[$i]}
    else
      also+=("$name${task:+ task $task} ($state)")
    fi
  done <<<"${final[${ids[$i]}]}"
done
what="round $round"; [ "$through" -gt "$round" ] && what="rounds $round-$through"
if [ -z "$failed" ] && [ ${#cancelled[@]} -eq 0 ]; then
  echo "submit-round: $what done" >&2
  exit 0
fi
echo "submit-round: $what: ${failed:-a stage did not complete}" >&2
if [ -n "$log" ] && [ -f "$log" ]; then tail -n 3 "$log" | sed 's/^/  | /' >&2; fi
if [ ${#also[@]} -gt 0 ]; then echo "submit-round: also ended early: ${also[*]}" >&2; fi
if [ ${#cancelled[@]} -gt 0 ]; then
  echo "submit-round: not run: $(printf '%s\n' "${cancelled[@]}" | uniq | paste -sd' ')" >&2
fi
first=$(printf '%s\n' "$failed" | sed -n 's/^stage \([^ ]*\).*/\1/p'); first=${first%-merge}; first=${first#r*/}
again=${failed_round:-$round}
echo "submit-round: resume with: $0 --from ${first:-STAGE}$([ "$through" -gt "$again" ] && echo " --through $through") $config $again $shards" >&2
exit "$code"
