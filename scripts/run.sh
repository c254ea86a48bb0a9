#!/usr/bin/env bash
# Start Emacs with this checkout's mevedel and the fetched deps loaded.
# A terminal Emacs when there is no display.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
args=(-Q -l scripts/load-path.el --eval "(require 'mevedel)" -f mevedel-status)
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then args=(-nw "${args[@]}"); fi
exec ${EMACS:-emacs} "${args[@]}"
