#!/usr/bin/env bash
# The tamper campaign: N random tamper cases (default 1000) over a generated ledger, in
# both copies; prints tried vs detected per kind. CI runs 150 cases as part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
TAMPER_CASES="${1:-1000}" cargo test --release -p replay-tests --test it -- --nocapture tamper::tamper_campaign 2>&1 \
  | grep -E 'tamper campaign|test result'
