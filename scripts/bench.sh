#!/usr/bin/env bash
# Run every benchmark (test/bench/*-bench.el), each in its own batch Emacs
# with the built module. Each prints a line describing its input, then
# one "BENCH <id> ours=<n> <unit> [peer=<id>:<n> <unit> ratio=<peer/ours>]"
# line per figure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "machine: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), $(${EMACS:-emacs} --version | head -1)"
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
status=0
for bench in test/bench/*-bench.el; do
  echo "== $bench"
  HOME=$home XDG_CONFIG_HOME=$home/.config XDG_CACHE_HOME=$home/.cache \
    ${EMACS:-emacs} -Q --batch -l scripts/load-path.el -L test -L test/bench -l test/mevedel-test-helpers.el \
    -l test/bench/mevedel-bench-lib.el -l "$bench" || status=1
done
exit $status
