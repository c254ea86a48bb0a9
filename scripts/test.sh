#!/usr/bin/env bash
# Run every test of mevedel and print one final "N passed, N failed" line.
#
# 1. cargo test (release profile: reuses the module's dependency build)
# 2. every ERT file, in batch Emacs with the built module and the
#    fetched deps on load-path, HOME and XDG_* in a fresh temp directory
#    (split across MEVEDEL_TEST_JOBS Emacs running side by side)
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

# ERT runs as MEVEDEL_TEST_JOBS Emacs side by side (default: 2 when
# the machine has two cores or more), each with every other test and
# its own HOME; the first one's output streams, the others' follows.
jobs=${MEVEDEL_TEST_JOBS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
ert_shard() {
  local home
  home=$(mktemp -d)
  HOME=$home XDG_CONFIG_HOME=$home/.config XDG_CACHE_HOME=$home/.cache \
  XDG_DATA_HOME=$home/.local/share XDG_STATE_HOME=$home/.local/state \
  XDG_RUNTIME_DIR=$home/run MEVEDEL_ROOT=$top MEVEDEL_TEST_SHARD="$1/$jobs" \
    ${EMACS:-emacs} -Q --batch -l scripts/load-path.el -l test/run-tests.el
  local status=$?
  rm -rf "$home"
  return $status
}
pids=()
for ((i = 1; i < jobs; i++)); do
  ert_shard "$i" >"$log/ert$i" 2>&1 &
  pids+=($!)
done
ert_shard 0 2>&1 | tee "$log/ert0"
ert_status=${PIPESTATUS[0]}
for ((i = 1; i < jobs; i++)); do
  wait "${pids[$((i - 1))]}" || ert_status=1
  echo "--- ERT shard $i of $jobs"
  cat "$log/ert$i"
done
ert_passed=0; ert_failed=0; ert_skipped=0
for ((i = 0; i < jobs; i++)); do
  p= f= k=
  read -r p f k < <(sed -n 's/^ERT: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' "$log/ert$i" | tail -1)
  # A shard that printed no summary died: count it as a failure.
  if [ -z "${p:-}" ]; then ert_failed=$((ert_failed + 1)); continue; fi
  ert_passed=$((ert_passed + p)); ert_failed=$((ert_failed + f)); ert_skipped=$((ert_skipped + k))
done
if [ "$ert_status" != 0 ] && [ "$ert_failed" = 0 ]; then ert_failed=1; fi

echo
echo "cargo: $cargo_passed passed, $cargo_failed failed"
echo "ERT:   $ert_passed passed, $ert_failed failed, $ert_skipped skipped"
passed=$((cargo_passed + ert_passed)); failed=$((cargo_failed + ert_failed))
echo "$passed passed, $failed failed, $ert_skipped skipped"
[ "$failed" = 0 ]
