#!/usr/bin/env bash
# Start Emacs with this checkout's mevedel and the fetched deps loaded,
# and open the session of this checkout (M-x mevedel).  Without a usable
# gptel backend the session talks to the offline demo model.  A config
# file ($MEVEDEL_INIT, else ~/.config/mevedel/init.el) is loaded first
# when it exists.  A terminal Emacs when there is no display.
# M-x mevedel-status still shows the native core's health.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
config=${MEVEDEL_INIT:-${XDG_CONFIG_HOME:-$HOME/.config}/mevedel/init.el}
args=(-Q -l scripts/load-path.el)
if [ -f "$config" ]; then args+=(-l "$config"); fi
args+=(--eval "(require 'mevedel)" -f mevedel-run)
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then args=(-nw "${args[@]}"); fi
exec ${EMACS:-emacs} "${args[@]}"
