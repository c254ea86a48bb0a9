#!/usr/bin/env bash
# Draw the view's screenshots (PNG) into DIR (default docs/images): a
# graphical Emacs under Xvfb runs scripts/screenshots.el, a scripted
# session against the scripted model (no network). Needs what
# `scripts/deps.sh screenshots` installs: a Cairo build of Emacs (Debian's
# emacs-gtk) and Xvfb. MEVEDEL_SCREENSHOT_EMACS names another Emacs.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=$(realpath -m "${1:-docs/images}")
emacs=${MEVEDEL_SCREENSHOT_EMACS:-$(command -v emacs-gtk || command -v emacs-lucid || command -v emacs)}
command -v Xvfb >/dev/null || { echo "screenshots: Xvfb is missing: run scripts/deps.sh screenshots" >&2; exit 1; }
"$emacs" --batch --eval '(kill-emacs (if (fboundp (quote x-export-frames)) 0 1))' 2>/dev/null || {
  echo "screenshots: $emacs cannot export frames (a Cairo build is needed): run scripts/deps.sh screenshots" >&2
  exit 1
}
home=$(mktemp -d)
xvfb=
cleanup() {
  [ -n "$xvfb" ] && kill "$xvfb" 2>/dev/null && wait "$xvfb" 2>/dev/null
  rm -rf "$home"
}
trap cleanup EXIT
# Xvfb picks a free display and writes its number once it accepts clients.
Xvfb -displayfd 3 -screen 0 1280x900x24 -nolisten tcp 3>"$home/display" >"$home/xvfb.log" 2>&1 &
xvfb=$!
for _ in $(seq 200); do
  [ -s "$home/display" ] && break
  kill -0 "$xvfb" 2>/dev/null || { cat "$home/xvfb.log" >&2; exit 1; }
  sleep 0.05
done
[ -s "$home/display" ] || { echo "screenshots: Xvfb did not start" >&2; exit 1; }
display=:$(tr -d '\n' <"$home/display")
mkdir -p "$out"
DISPLAY=$display HOME=$home XDG_CONFIG_HOME=$home/.config XDG_CACHE_HOME=$home/.cache \
  timeout 120 "$emacs" -Q -l scripts/load-path.el -l scripts/screenshots.el \
  --eval "(condition-case err (progn (screenshots-run \"$out\") (kill-emacs 0)) \
            (error (princ (format \"screenshots: %s\\n\" (error-message-string err)) \
                     (function external-debugging-output)) \
                   (kill-emacs 1)))" \
  2> >(grep -v "^Loading\|lexical-binding" >&2) || { cat "$home/xvfb.log" >&2; exit 1; }
ls "$out"/*.png
