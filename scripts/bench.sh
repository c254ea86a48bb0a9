#!/usr/bin/env bash
# Run every benchmark (test/bench/*-bench.el), each in its own batch Emacs
# with the built module. Each prints a line describing its input, then
# one "BENCH <id> ours=<n> <unit> [peer=<id>:<n> <unit> ratio=<peer/ours>]"
# line per figure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "machine: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), $(${EMACS:-emacs} --version | head -1)"
# Peers that are programs of ours are built first, while cargo still
# finds its toolchain and crates under the caller's HOME.
${CARGO:-cargo} build --release --locked --quiet -p mevedel-core --example mcp_bare_echo --example acp_bare_turn
# Every run has its own HOME and XDG directories: two runs at once
# share no state there.
home=$(mktemp -d)
export HOME=$home XDG_CONFIG_HOME=$home/.config XDG_CACHE_HOME=$home/.cache \
  XDG_DATA_HOME=$home/.local/share XDG_STATE_HOME=$home/.local/state XDG_RUNTIME_DIR=$home/run
# Installed packages run byte-compiled, and the original figures the
# benches quote were taken from byte-compiled code: compile the Lisp, the
# test helpers and the benches themselves in place (the .elc files go
# again at exit), so that no figure measures the interpreter.  Another
# run in this checkout may be loading them: each run holds a shared lock
# on lisp/ until it exits, and only a run that can then take it alone
# (the last one out) removes them.  Byte-compiling writes each .elc to a
# temporary file and renames it, so a reader never sees one half written.
# The lock is this script's alone (9<&-): a process a bench leaves
# behind must not keep it.
els=(lisp/*.el test/mevedel-test-helpers.el test/bench/*.el)
exec 9<lisp
flock -s 9
trap 'rm -rf "$home"; if flock -xn 9; then rm -f "${els[@]/%.el/.elc}"; fi' EXIT
${EMACS:-emacs} -Q --batch -l scripts/load-path.el -L test -L test/bench \
  -f batch-byte-compile "${els[@]}" 9<&-
# The fetched packages (gptel among them) run byte-compiled too, as an
# installed package does: a copy of .deps/elpa under this run's HOME is
# compiled and named by MEVEDEL_DEPS_DIR (scripts/load-path.el), which
# bin/mevedel's Emacs inherits; .deps stays as fetched.  A file that does
# not compile (an optional integration) stays interpreted.
deps=${MEVEDEL_DEPS_DIR:-$top/.deps}
mkdir "$home/deps"
for entry in "$deps"/*; do ln -s "$(readlink -f "$entry")" "$home/deps/"; done
rm "$home/deps/elpa"
cp -r "$deps/elpa" "$home/deps/elpa"
export MEVEDEL_DEPS_DIR=$home/deps
${EMACS:-emacs} -Q --batch -l scripts/load-path.el --eval '(setq byte-compile-warnings nil)' \
  -f batch-byte-compile "$home"/deps/elpa/*/*.el >/dev/null 2>&1 9<&- || true
status=0
for bench in test/bench/*-bench.el; do
  echo "== $bench"
  ${EMACS:-emacs} -Q --batch -l scripts/load-path.el -L test -L test/bench -l test/mevedel-test-helpers.elc \
    -l test/bench/mevedel-bench-lib.elc -l "${bench%.el}.elc" 9<&- || status=1
done
exit $status
