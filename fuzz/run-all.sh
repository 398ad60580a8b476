#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) on the stable toolchain
# (`cargo fuzz run -s none`), starting from the committed seeds in fuzz/corpus/<target>
# and growing a working corpus in fuzz/corpus-work/<target> (not committed). Prints the
# executions and crashes per target. Needs `cargo install cargo-fuzz`.
set -uo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
targets=(decode_entry decode_frame decode_command_json checkpoint_json command_sequence store_corruption)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
cargo fuzz build -s none -O "${targets[@]}" >/dev/null 2>&1 || cargo fuzz build -s none -O
printf '%-22s %14s %8s\n' target execs crashes
for t in "${targets[@]}"; do
  mkdir -p "corpus-work/$t" "artifacts/$t"
  cp -n "corpus/$t"/* "corpus-work/$t"/ 2>/dev/null || true
  log="artifacts/$t/run.log"
  cargo fuzz run -s none -O "$t" "corpus-work/$t" -- -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix="artifacts/$t/" >"$log" 2>&1
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  crashes=$(find "artifacts/$t" -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' | wc -l)
  printf '%-22s %14s %8s\n' "$t" "${execs:-?}" "$crashes"
done
