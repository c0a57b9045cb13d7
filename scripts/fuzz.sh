#!/usr/bin/env bash
# Runs every property test over generated inputs for a long time, one target
# at a time: 10^6 cases per property by default (`cargo test` runs 256).
#
#   scripts/fuzz.sh                 # 10^6 cases per target, release build
#   scripts/fuzz.sh 20000           # fewer cases
#   FUZZ_MAX_SECONDS=600 scripts/fuzz.sh   # stop a target after 10 min (it fails)
#
# Prints each target's case count and time. Any failure is saved by proptest
# under executor/tests/*.proptest-regressions and replayed first on every
# later run: check those in. The seed inputs are executor/tests/fuzz-seeds/
# and the redaction corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-1000000}"
max_seconds="${FUZZ_MAX_SECONDS:-3600}"

declare -A targets=(
  [redaction_props]="a_planted_secret_never_survives a_secret_named_value_is_withheld_in_any_case_and_convention any_text_is_shaped_within_bounds no_run_of_lines_hides_more_than_the_bound"
  [boundary_props]="approval_decoding_accepts_only_well_formed_claims approval_claims_round_trip approval_signature_binds_every_byte approval_window_agrees_with_the_oracle approval_verification_agrees_with_the_oracle policy_matching_agrees_with_the_oracle glob_matching_is_bounded container_refs_are_exactly_docker_names request_ids_are_bounded_and_plain config_parsing_never_accepts_a_broken_policy config_unknown_keys_are_refused_by_name"
)

cargo test --release -p drydock-executor --test redaction_props --test boundary_props --no-run
status=0
for file in redaction_props boundary_props; do
  for target in ${targets[$file]}; do
    start=$(date +%s)
    if PROPTEST_CASES="$cases" timeout "$max_seconds" \
        cargo test --release -q -p drydock-executor --test "$file" -- --exact "$target" >/tmp/fuzz-$target.log 2>&1; then
      result=ok
    else
      result=FAILED
      status=1
    fi
    printf '%-58s %10s cases %6ss  %s\n' "$file::$target" "$cases" "$(( $(date +%s) - start ))" "$result"
    if [ "$result" = FAILED ]; then tail -30 "/tmp/fuzz-$target.log"; fi
  done
done
exit $status
