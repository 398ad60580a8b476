#!/usr/bin/env bash
# The crash campaign: N rounds (default 100) of SIGKILL at a random moment of a process
# running the engine under concurrent load (8 submitters); after each round the ledger is
# reopened (a full replay) and every printed receipt is checked. Prints acknowledged vs
# present per round and a total. CI runs 20 rounds as part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
CRASH_ROUNDS="${1:-100}" cargo test --release -p replay-tests --test it -- --nocapture --test-threads=1 \
  crash::engine_kill_9_loses_no_receipt crash::kill_9_loses_no_acknowledged_entry 2>&1 | grep -E 'crash|test result'
