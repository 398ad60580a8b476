#!/usr/bin/env bash
# Runs every fuzz target on the stable toolchain (`cargo fuzz run -s none -O`), starting
# from the committed seeds in fuzz/corpus/<target> and growing a working corpus in
# fuzz/corpus-work/<target> (not committed). Prints the executions, execs/s and crashes per
# target. Needs `cargo install cargo-fuzz` (installed on first use).
#
#   fuzz/run-all.sh [SECONDS]          every target for SECONDS (default 60) — a smoke run
#   fuzz/run-all.sh --runs D M         budget mode: each decoder target until D executions,
#                                      each model target until M executions (libFuzzer
#                                      -runs=; no time limit). The documented long run:
#                                      fuzz/run-all.sh --runs 10000000 1000000
#
# FUZZ_BUILD_FLAGS="--no-trace-compares" builds without libFuzzer's comparison tracing: the
# model targets run ~1.4x the executions a second (docs/performance.md, twelfth session)
# at the cost of comparison-guided mutation; every oracle is the same.
# FUZZ_TARGETS="a b" restricts the run to some targets. Decoder targets: decode_entry,
# decode_frame, decode_command_json, checkpoint_json; model targets: command_sequence,
# store_corruption. Expected durations: docs/performance.md, "Fuzz targets (seventh session)".
set -uo pipefail
cd "$(dirname "$0")"
decoders=(decode_entry decode_frame decode_command_json checkpoint_json)
models=(command_sequence store_corruption)
mode=time
secs=60
if [[ "${1:-}" == "--runs" ]]; then
  mode=runs
  decoder_runs="${2:?--runs DECODER_RUNS MODEL_RUNS}"
  model_runs="${3:?--runs DECODER_RUNS MODEL_RUNS}"
elif [[ -n "${1:-}" ]]; then
  secs="$1"
fi
read -r -a targets <<<"${FUZZ_TARGETS:-${decoders[*]} ${models[*]}}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
read -r -a build_flags <<<"${FUZZ_BUILD_FLAGS:-}"
cargo fuzz build -s none -O "${build_flags[@]}" >/dev/null 2>&1 || { echo "cargo fuzz build failed" >&2; exit 1; }
printf '%-22s %14s %10s %8s\n' target execs execs/s crashes
status=0
for t in "${targets[@]}"; do
  mkdir -p "corpus-work/$t" "artifacts/$t"
  cp -n "corpus/$t"/* "corpus-work/$t"/ 2>/dev/null || true
  log="artifacts/$t/run.log"
  if [[ "$mode" == runs ]]; then
    budget="$decoder_runs"
    [[ " ${models[*]} " == *" $t "* ]] && budget="$model_runs"
    limit=(-runs="$budget")
  else
    limit=(-max_total_time="$secs")
  fi
  cargo fuzz run -s none -O "${build_flags[@]}" "$t" "corpus-work/$t" -- "${limit[@]}" -print_final_stats=1 \
    -artifact_prefix="artifacts/$t/" >"$log" 2>&1 || status=1
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  rate=$(grep -m1 'stat::average_exec_per_sec' "$log" | awk '{print $2}')
  crashes=$(find "artifacts/$t" -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' | wc -l)
  printf '%-22s %14s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$crashes"
done
exit "$status"
