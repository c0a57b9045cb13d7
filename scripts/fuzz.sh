#!/usr/bin/env bash
# Runs the property tests over generated inputs for a long time: 10^6 cases
# per property by default (CI runs 256 with `cargo test`). Any failure is
# saved by proptest under executor/tests/*.proptest-regressions and replayed
# first on the next run: check those in.
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-1000000}"
PROPTEST_CASES="$cases" cargo test --release -p drydock-executor --test redaction_props -- --nocapture
