#!/usr/bin/env bash
# Runs tools/lab/slurm-array.sh on a private single-node Slurm and checks the merged dataset.
#
# usage: tests/lab/slurm_test.sh LATHE_BINARY
#
# Starts, as root and in a temporary folder, its own munged (own key and socket), slurmctld and
# slurmd (ports 16817-16818, own state, spool, logs and pid files), so a system Slurm or munge
# is left alone. Sweeps the bundled catalog in 3 array tasks plus a merge job, then checks with
# pyarrow that every tiny fixture shows up once in the merged dataset and passes.
# Exit status: 0 pass, 1 fail, 77 skipped (not root, or Slurm/munge not installed).
set -euo pipefail

fail() {
  echo "slurm_test: FAIL: $*" >&2
  exit 1
}
skip() {
  # In CI (CI=true) a missing Slurm fails: tools/test.sh installs it there.
  [ "${CI:-}" = "true" ] && fail "cannot skip in CI: $*"
  echo "slurm_test: SKIP: $*" >&2
  exit 77
}

[ $# -eq 1 ] || { echo "usage: $0 LATHE_BINARY" >&2; exit 2; }
lathe=$(realpath "$1")
[ -x "$lathe" ] || fail "$1 is not an executable"
repo=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$repo/tests/fixtures/tiny
python=${LATHE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/venv}/bin/python

[ "$(id -u)" -eq 0 ] || skip "needs root to run slurmd and munged"
for tool in munged munge slurmctld slurmd sbatch sinfo squeue scancel; do
  command -v "$tool" >/dev/null || skip "$tool not installed (apt-get install slurm-wlm munge)"
done
"$python" -c "import pyarrow" 2>/dev/null || fail "no pyarrow in $python (run tools/setup.sh)"

started=$SECONDS
# munged wants every directory above its socket to be searchable by all.
tmp=$(mktemp -d /tmp/lathe-slurm-test.XXXXXX)
chmod 711 "$tmp"
mkdir -m 755 "$tmp/munge"
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/run"
munged_pid="" slurmctld_pid="" slurmd_pid="" sweep_pid=""
export SLURM_CONF=$tmp/slurm.conf

# Stops a daemon by pid: TERM, then KILL after 10 s.
stop() {
  local name=$1 pid=$2
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "slurm_test: $name ($pid) ignored TERM; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # timeout(1) heads its own process group and passes TERM on to all of it (sbatch included).
  [ -z "$sweep_pid" ] || kill -TERM "$sweep_pid" 2>/dev/null || true
  if [ -n "$slurmctld_pid" ] && kill -0 "$slurmctld_pid" 2>/dev/null; then
    # Jobs left over after a failure: cancel them so that no slurmstepd outlives the test.
    scancel --quiet --full --user=root 2>/dev/null || true
    for _ in $(seq 30); do
      [ -z "$(squeue --noheader --format=%i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  if ((status != 0)); then
    for log in slurmctld.log slurmd.log munged.log; do
      [ -f "$tmp/run/$log" ] || continue
      echo "---- last lines of $log" >&2
      tail -n 20 "$tmp/run/$log" >&2
    done
    for log in "$tmp"/sweep/logs/*.log; do
      [ -f "$log" ] || continue
      echo "---- last lines of ${log#"$tmp"/}" >&2
      tail -n 10 "$log" >&2
    done
  fi
  stop slurmd "$slurmd_pid"
  stop slurmctld "$slurmctld_pid"
  stop munged "$munged_pid"
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# --- munge: a private key and socket ---------------------------------------------------------
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge.key"
socket=$tmp/munge/munge.socket
munged --foreground --key-file="$tmp/munge.key" --socket="$socket" \
  --pid-file="$tmp/run/munged.pid" --log-file="$tmp/run/munged.log" \
  --seed-file="$tmp/run/munged.seed" >"$tmp/run/munged.out" 2>&1 &
munged_pid=$!
munge_works() { munge --socket="$socket" --no-input 2>/dev/null | unmunge --socket="$socket" >/dev/null 2>&1; }
wait_for 20 munge_works || fail "munged did not start"

# --- slurm.conf: one node, this machine, as slurmd -C sees it ----------------------------------
node=$(hostname -s)
hardware=$(slurmd -C | head -n 1) # NodeName=... CPUs=... RealMemory=...
[[ "$hardware" == NodeName=* ]] || fail "slurmd -C printed no node line: $hardware"
hardware=${hardware#NodeName=* }
cat >"$SLURM_CONF" <<EOF
ClusterName=lathe-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/run/slurmctld.log
SlurmdLogFile=$tmp/run/slurmd.log
PlugStackConfig=$tmp/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 $hardware State=UNKNOWN
PartitionName=lab Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
: >"$tmp/plugstack.conf"

# --- the daemons -------------------------------------------------------------------------------
slurmctld -D -i >"$tmp/run/slurmctld.out" 2>&1 &
slurmctld_pid=$!
slurmd -D -N "$node" >"$tmp/run/slurmd.out" 2>&1 &
slurmd_pid=$!
node_idle() {
  kill -0 "$slurmctld_pid" 2>/dev/null || fail "slurmctld exited: $(tail -n 5 "$tmp/run/slurmctld.out")"
  kill -0 "$slurmd_pid" 2>/dev/null || fail "slurmd exited: $(tail -n 5 "$tmp/run/slurmd.out")"
  [ "$(sinfo --noheader --nodes="$node" --format=%T 2>/dev/null)" = "idle" ]
}
wait_for 60 node_idle || fail "node $node not idle after 60 s: $(sinfo --noheader -N --long 2>&1)"
echo "slurm_test: private Slurm up on $node after $((SECONDS - started)) s"

# --- the sweep ---------------------------------------------------------------------------------
# Runs slurm-array.sh under a time limit, in the background so that a signal reaches the trap
# at once instead of after the sweep.
run_sweep() {
  timeout "$@" &
  sweep_pid=$!
  local status=0
  wait "$sweep_pid" || status=$?
  sweep_pid=""
  return "$status"
}
sweep=$tmp/sweep
run_sweep 150 "$repo/tools/lab/slurm-array.sh" --tasks 3 --out "$sweep" --lathe "$lathe" --wait \
  -- --fixtures "$fixtures" --reference-cache "$tmp/reference" --quiet ||
  fail "slurm-array.sh --wait failed (exit $?)"

for i in 0 1 2; do
  [ -s "$sweep/shard-$i/rows.jsonl" ] || fail "shard-$i holds no rows"
  grep -q "^shard $i/3 " "$sweep/logs/shard-$i.log" || fail "shard-$i did not run as array task $i of 3"
done
[ ! -e "$sweep/shard-3" ] || fail "a 4th shard folder appeared"

"$python" - "$sweep/merged/dataset" "$fixtures" <<'EOF' || fail "merged dataset check failed"
import collections, pathlib, sys
import pyarrow.parquet as pq

dataset, fixtures = sys.argv[1], pathlib.Path(sys.argv[2])
expected = sorted(p.parent.name for p in fixtures.glob("*/goldens.json"))
table = pq.read_table(dataset, columns=["model_id", "status"])
models = [m.rsplit("/", 1)[-1] for m in table.column("model_id").to_pylist()]
statuses = table.column("status").to_pylist()
problems = []
if not expected:
    problems.append(f"no fixtures with goldens.json under {fixtures}")
counts = collections.Counter(models)
twice = sorted(m for m, n in counts.items() if n > 1)
if twice:
    problems.append(f"models with more than one row: {twice}")
if sorted(counts) != expected:
    problems.append(f"missing: {sorted(set(expected) - set(counts))}; "
                    f"unexpected: {sorted(set(counts) - set(expected))}")
failing = [(m, s) for m, s in zip(models, statuses) if s != "pass"]
if failing:
    problems.append(f"rows that do not pass: {failing}")
for p in problems:
    print("slurm_test:", p, file=sys.stderr)
print(f"slurm_test: merged dataset: {table.num_rows} rows, expected {len(expected)}, "
      f"{len(failing)} not passing")
sys.exit(1 if problems else 0)
EOF
# --wait must report a failed merge: with a bad lab option no shard leaves rows.
if run_sweep 60 "$repo/tools/lab/slurm-array.sh" --tasks 2 --out "$tmp/broken" --lathe "$lathe" \
  --wait -- --no-such-option >"$tmp/broken.out" 2>&1; then
  fail "slurm-array.sh --wait exited 0 although every shard failed: $(cat "$tmp/broken.out")"
fi
grep -q "no shard has rows" "$tmp/broken/logs/merge.log" ||
  fail "the merge job of the broken sweep did not run: $(cat "$tmp/broken.out")"
echo "slurm_test: a failed sweep makes slurm-array.sh --wait fail, as it should"
echo "slurm_test: PASS in $((SECONDS - started)) s"
