#!/usr/bin/env bash
# Run every test of mevedel and print one final "N passed, N failed" line.
#
# 1. cargo test (release profile: reuses the module's dependency build)
# 2. every ERT file, in one batch Emacs with the built module and the
#    fetched deps on load-path, HOME and XDG_* in a fresh temp directory
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

cargo test --release --locked 2>&1 | tee "$log/cargo"
cargo_status=${PIPESTATUS[0]}
read -r cargo_passed cargo_failed < <(awk '
  /^test result:/ { for (i = 1; i <= NF; i++) {
      if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
  END { print p + 0, f + 0 }' "$log/cargo")
if [ "$cargo_status" != 0 ] && [ "$cargo_failed" = 0 ]; then cargo_failed=1; fi

# cargo and rustup keep their state under the real HOME.
export CARGO_HOME=${CARGO_HOME:-$HOME/.cargo} RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
home=$(mktemp -d)
HOME=$home XDG_CONFIG_HOME=$home/.config XDG_CACHE_HOME=$home/.cache \
XDG_DATA_HOME=$home/.local/share XDG_STATE_HOME=$home/.local/state \
XDG_RUNTIME_DIR=$home/run MEVEDEL_ROOT=$top \
  ${EMACS:-emacs} -Q --batch -l scripts/load-path.el -l test/run-tests.el 2>&1 | tee "$log/ert"
ert_status=${PIPESTATUS[0]}
rm -rf "$home"
read -r ert_passed ert_failed ert_skipped < <(sed -n 's/^ERT: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' "$log/ert" | tail -1)
ert_passed=${ert_passed:-0}; ert_failed=${ert_failed:-0}; ert_skipped=${ert_skipped:-0}
if [ "$ert_status" != 0 ] && [ "$ert_failed" = 0 ]; then ert_failed=1; fi

echo
echo "cargo: $cargo_passed passed, $cargo_failed failed"
echo "ERT:   $ert_passed passed, $ert_failed failed, $ert_skipped skipped"
passed=$((cargo_passed + ert_passed)); failed=$((cargo_failed + ert_failed))
echo "$passed passed, $failed failed, $ert_skipped skipped"
[ "$failed" = 0 ]
