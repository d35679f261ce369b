#!/usr/bin/env bash
# Runs a lathe lab sweep as a Slurm job array, then merges the shards in a dependent job.
#
# usage: tools/lab/slurm-array.sh --tasks N --out DIR [--lathe PATH] [--wait] [-- LAB_RUN_ARGS...]
#
# Task i of the array runs
#   lathe lab run --shard i/N --out DIR/shard-i LAB_RUN_ARGS...
# and a merge job, started once every task has ended (--dependency=afterany), runs
#   lathe lab merge DIR/merged DIR/shard-*
# The merge job fails when a shard left no rows, so a lost task shows up in its exit status.
#
# Options:
#   --tasks N      number of array tasks (shards), N >= 1
#   --out DIR      sweep folder on a file system every node can reach; it gets shard-I/,
#                  merged/, logs/ (the Slurm output of each job) and slurm/ (the job scripts)
#   --lathe PATH   lathe binary, reachable at the same path on the compute nodes
#                  (default: build/lathe of this checkout when present, else lathe on PATH)
#   --wait         block until the merge job has ended; exit non-zero when it failed
#   --help         show this help
# Arguments after -- go to every `lathe lab run` (e.g. --catalog FILE --threads 4 --timeout 900).
#
# sbatch options come from the environment, which sbatch reads itself, e.g.
#   SBATCH_PARTITION=cpu SBATCH_ACCOUNT=lab SBATCH_TIMELIMIT=2:00:00 tools/lab/slurm-array.sh ...
# Options sbatch has no variable for go in SBATCH_EXTRA (split on spaces, given to both jobs):
#   SBATCH_EXTRA="--cpus-per-task=4 --mem=16G" tools/lab/slurm-array.sh ... -- --threads 4
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() {
  echo "slurm-array: $*" >&2
  exit 2
}

tasks=""
out=""
lathe=""
wait_for_merge=0
while (($#)); do
  case "$1" in
    --tasks) [ $# -ge 2 ] || die "--tasks needs a value"; tasks=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; out=$2; shift 2 ;;
    --lathe) [ $# -ge 2 ] || die "--lathe needs a value"; lathe=$2; shift 2 ;;
    --wait) wait_for_merge=1; shift ;;
    --help | -h) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (lathe lab run options go after --; see --help)" ;;
  esac
done
run_args=("$@")

[[ "$tasks" =~ ^[1-9][0-9]*$ ]] || die "--tasks N is required (a positive integer)"
[ -n "$out" ] || die "--out DIR is required"
command -v sbatch >/dev/null || die "sbatch not found: run this on a Slurm login node"

if [ -z "$lathe" ]; then
  default="$(cd "$(dirname "$0")/../.." && pwd)/build/lathe"
  if [ -x "$default" ]; then
    lathe=$default
  else
    lathe=$(command -v lathe) || die "no lathe binary: pass --lathe PATH"
  fi
fi
[ -x "$lathe" ] || die "$lathe is not an executable"
lathe=$(realpath "$lathe")

mkdir -p "$out"
out=$(realpath "$out")
resume=0
for arg in "${run_args[@]}"; do [ "$arg" != "--resume" ] || resume=1; done
# slurm/ is written at submission, so a sweep whose tasks have not started yet counts too.
if ((!resume)) && { [ -e "$out/slurm" ] || compgen -G "$out/shard-*" >/dev/null; }; then
  die "$out already holds a sweep: choose another --out, or pass -- --resume to continue it"
fi
mkdir -p "$out/logs" "$out/slurm"

# The job scripts take everything as arguments (sbatch passes them on), so nothing is quoted twice.
cat >"$out/slurm/shard.sh" <<'EOF'
#!/usr/bin/env bash
# One shard of the sweep: shard.sh LATHE OUT TASKS [lab run args...]
set -euo pipefail
lathe=$1 out=$2 tasks=$3
shift 3
i=$SLURM_ARRAY_TASK_ID
n=${SLURM_ARRAY_TASK_COUNT:-$tasks}
echo "shard $i/$n on $(hostname) (job ${SLURM_ARRAY_JOB_ID}_$i)"
exec "$lathe" lab run --shard "$i/$n" --out "$out/shard-$i" "$@"
EOF
cat >"$out/slurm/merge.sh" <<'EOF'
#!/usr/bin/env bash
# Merges the shards: merge.sh LATHE OUT TASKS. Fails when a shard left no rows.
set -euo pipefail
lathe=$1 out=$2 tasks=$3
shards=()
missing=()
for ((i = 0; i < tasks; i++)); do
  if [ -s "$out/shard-$i/rows.jsonl" ]; then
    shards+=("$out/shard-$i")
  else
    missing+=("shard-$i")
  fi
done
((${#shards[@]})) || { echo "merge: no shard has rows" >&2; exit 1; }
"$lathe" lab merge "$out/merged" "${shards[@]}"
"$lathe" lab report "$out/merged" --json >"$out/merged/report.json"
if ((${#missing[@]})); then
  echo "merge: no rows from ${missing[*]} (see $out/logs/); merged the others" >&2
  exit 1
fi
EOF
chmod +x "$out/slurm/shard.sh" "$out/slurm/merge.sh"

# Optional extra sbatch options, split on spaces on purpose.
read -r -a extra <<<"${SBATCH_EXTRA:-}"

array_id=$(sbatch --parsable "${extra[@]}" \
  --job-name=lathe-lab --array="0-$((tasks - 1))" \
  --output="$out/logs/shard-%a.log" \
  "$out/slurm/shard.sh" "$lathe" "$out" "$tasks" "${run_args[@]}")
array_id=${array_id%%;*} # --parsable prints "id;cluster" on multi-cluster setups
echo "array job: $array_id ($tasks tasks, logs in $out/logs/)"

merge=(sbatch --parsable "${extra[@]}")
((!wait_for_merge)) || merge+=(--wait) # sbatch then exits with the merge job's status
merge+=(--job-name=lathe-lab-merge --dependency="afterany:$array_id" --kill-on-invalid-dep=yes
  --output="$out/logs/merge.log" "$out/slurm/merge.sh" "$lathe" "$out" "$tasks")
# Read the id from the pipe so that it shows before sbatch --wait returns.
set +e
"${merge[@]}" | {
  read -r merge_id && echo "merge job: ${merge_id%%;*} (result in $out/merged/, log in $out/logs/merge.log)"
  cat
}
status=${PIPESTATUS[0]}
set -e
if ((status)); then
  echo "slurm-array: sbatch for the merge job failed, or the merge job did (exit $status); see $out/logs/" >&2
  exit 1
fi
((!wait_for_merge)) || echo "merged: $out/merged/"
