#!/usr/bin/env bash
# Install what mevedel's build, tests and `make run` need, idempotently.
#
#  - Emacs >= 30.1 (from Debian bookworm-backports when root on Debian)
#  - bubblewrap, curl, git, poppler-utils, python3, ripgrep, tmux,
#    openssh-client, openssh-server, rsync and sudo (apt when root;
#    ripgrep is the reference the Grep/Glob tests and benches compare
#    with, pdftotext the PDF text WebFetch returns, sshd the private
#    server the remote tests start on 127.0.0.1, rsync and sudo the
#    TRAMP methods /rsync: and /sudo: the remote tests drive)
#  - gptel and its Lisp dependencies, extracted from Debian's unstable
#    archive into .deps/elpa/ through a private apt directory that never
#    touches the system's apt configuration.
#  - the MCP servers the Rust MCP tests talk to, none of them written
#    here, at pinned versions: @modelcontextprotocol/server-everything
#    and -filesystem and the conformance suite from npm into
#    .deps/mcp/npm/, mcp-server-time from PyPI into the virtualenv
#    .deps/mcp/venv/ (never installed globally).
#  - the ACP agents the Rust ACP tests drive, at a pinned version:
#    @zed-industries/claude-agent-acp (Claude Code's CLI comes inside it)
#    from npm into .deps/acp/npm/ (never installed globally).
#  - the shared whiteboard page's build and browser test, at pinned
#    versions: @excalidraw/excalidraw, react, react-dom, esbuild and
#    playwright-core from npm into .deps/shared/npm/ (never installed
#    globally), and Debian's chromium for the headless browser test.
#
# `scripts/deps.sh screenshots' (or MEVEDEL_DEPS_SCREENSHOTS=1) also
# installs a graphical Emacs and Xvfb for `make screenshots' and for the
# graphical tests `make test' runs (test/e2e/graphical-e2e-test.el).
#
# Environment:
#   MEVEDEL_DEPS_DIR          where to put fetched packages (default: .deps)
#   MEVEDEL_APT_SKIP_VALID_UNTIL=1
#                             accept a sid Release file that the host clock
#                             judges expired (signatures are still checked)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
deps=${MEVEDEL_DEPS_DIR:-$top/.deps}
# The Debian mirror: MEVEDEL_DEBIAN_MIRROR, else the one this system's
# apt sources already use for its main suite.
detect_mirror() {
  local uri
  uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' \
                           /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1)
  printf '%s' "$uri"
}
mirror=${MEVEDEL_DEBIAN_MIRROR:-$(detect_mirror)}
elpa_pkgs=(elpa-gptel elpa-transient elpa-compat elpa-cond-let elpa-llama)

say() { printf 'deps: %s\n' "$*" >&2; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }
is_debian() { [ -r /etc/debian_version ] && command -v apt-get >/dev/null; }

apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

emacs_ok() {
  command -v emacs >/dev/null || return 1
  emacs --batch --eval '(kill-emacs (if (version<= "30.1" emacs-version) 0 1))' 2>/dev/null
}

need_mirror() {
  [ -n "$mirror" ] || die "cannot tell which Debian mirror apt uses; set MEVEDEL_DEBIAN_MIRROR"
}

want_screenshots() {
  [ "${1:-}" = screenshots ] || [ "${MEVEDEL_DEPS_SCREENSHOTS:-}" = 1 ]
}

ensure_emacs() {
  if emacs_ok; then return; fi
  # With the screenshots wanted, the graphical build is the one Emacs
  # from the start, rather than replacing emacs-nox later.
  local package=emacs-nox
  want_screenshots "$@" && package=emacs-gtk
  if is_root && is_debian && grep -q bookworm /etc/os-release; then
    say "installing $package 30 from bookworm-backports"
    need_mirror
    local list=/etc/apt/sources.list.d/mevedel-bookworm-backports.list
    if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "deb $mirror bookworm-backports main" > "$list"
      apt_updated=
    fi
    apt_install -t bookworm-backports "$package"
    emacs_ok || die "$package from bookworm-backports is older than 30.1"
  else
    die "Emacs >= 30.1 is required. Install it (Debian 12: enable bookworm-backports and
       'apt-get install -t bookworm-backports emacs-nox'; elsewhere your distribution's emacs 30 package)."
  fi
}

ensure_tools() {
  local missing=() cmd pkg
  for pair in bwrap:bubblewrap chromium:chromium curl:curl git:git pdftotext:poppler-utils python3:python3 \
              rg:ripgrep rsync:rsync sudo:sudo tmux:tmux; do
    cmd=${pair%%:*}; pkg=${pair#*:}
    command -v "$cmd" >/dev/null || missing+=("$pkg")
  done
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
  command -v ssh >/dev/null || missing+=(openssh-client)
  # sbin is not on every user's PATH; the tests run this very file.
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  [ ${#missing[@]} = 0 ] && return
  if is_root && is_debian; then
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
  else
    die "missing packages: ${missing[*]} (install them with your package manager)"
  fi
}

ensure_cargo() {
  command -v cargo >/dev/null && return
  [ -x "$HOME/.cargo/bin/cargo" ] && return
  die "cargo is missing: install the Rust toolchain with rustup (https://rustup.rs), then rerun"
}

# The options that point every apt path into the private directory $1
# (sid's lists, no system state), in the array `opts'.
sid_apt_opts() {
  local apt=$1
  opts=(
    -o "Dir::Etc::sourcelist=$apt/sources.list"
    -o "Dir::Etc::sourceparts=-"
    -o "Dir::Etc::preferencesparts=$apt/etc/preferences.d"
    -o "Dir::Etc::trustedparts=$apt/etc/trusted.gpg.d"
    -o "Dir::State::Lists=$apt/lists"
    -o "Dir::State::status=$apt/status"
    -o "Dir::Cache=$apt/cache"
    -o "APT::Architecture=$(dpkg --print-architecture)"
    -o "Debug::NoLocking=1"
  )
  is_root && opts+=(-o "APT::Sandbox::User=root")
  [ "${MEVEDEL_APT_SKIP_VALID_UNTIL:-}" = 1 ] && opts+=(-o "Acquire::Check-Valid-Until=false")
  return 0
}

# Fetch the ELPA packages from sid into $deps/elpa without changing the
# system's apt state: every apt path points into $deps/apt.
ensure_elpa() {
  local stamp=$deps/elpa/.stamp
  [ -f "$stamp" ] && return
  command -v apt-get >/dev/null || die "apt-get is needed to fetch gptel from Debian's archive;
       otherwise install gptel >= 0.9.9 yourself and put it on load-path"
  need_mirror
  local apt=$deps/apt
  rm -rf "$apt" "$deps/elpa"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc/preferences.d" \
           "$apt/etc/trusted.gpg.d" "$deps/elpa" "$apt/debs"
  : > "$apt/status"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main" \
    > "$apt/sources.list"
  local opts=()
  sid_apt_opts "$apt"
  say "fetching ${elpa_pkgs[*]} from Debian unstable into $deps/elpa"
  if ! apt-get "${opts[@]}" -qq update >&2; then
    die "could not read Debian unstable's package lists. If apt said the Release file
       is expired, rerun with MEVEDEL_APT_SKIP_VALID_UNTIL=1 (signatures are still verified)."
  fi
  (cd "$apt/debs" && apt-get "${opts[@]}" -qq download "${elpa_pkgs[@]}" >&2)
  local manifest=$deps/elpa/MANIFEST deb
  : > "$manifest"
  for deb in "$apt"/debs/*.deb; do
    dpkg -x "$deb" "$apt/root"
    printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
      "$(sha256sum "$deb" | cut -d' ' -f1)" >> "$manifest"
  done
  local src
  for src in "$apt"/root/usr/share/emacs/site-lisp/elpa-src/*/; do
    cp -r "$src" "$deps/elpa/"
  done
  find "$deps/elpa" -name '*-tests.el' -delete
  rm -rf "$apt/root"
  date -u +%FT%TZ > "$stamp"
  say "installed: $(tr '\n' ';' < "$manifest")"
}

# Build the tree-sitter grammars the Treesitter tests parse with (JSON),
# for the libtree-sitter Emacs links against, into $deps/tree-sitter/.
# The grammar's C source comes from sid's tree-sitter-json-src, through
# the private apt directory of ensure_elpa.
ensure_grammars() {
  local out=$deps/tree-sitter
  [ -f "$out/libtree-sitter-json.so" ] && return
  command -v cc >/dev/null || {
    if is_root && is_debian; then apt_install gcc libc6-dev
    else die "a C compiler (cc) is needed to build the tree-sitter JSON grammar"; fi
  }
  local apt=$deps/apt opts=()
  [ -d "$apt/lists" ] || die "$apt is missing: remove $deps/elpa/.stamp and rerun"
  sid_apt_opts "$apt"
  say "building the tree-sitter JSON grammar into $out"
  local work
  work=$(mktemp -d)
  (cd "$work" && apt-get "${opts[@]}" -qq download tree-sitter-json-src >&2) || {
    apt-get "${opts[@]}" -qq update >&2
    (cd "$work" && apt-get "${opts[@]}" -qq download tree-sitter-json-src >&2)
  }
  dpkg -x "$work"/tree-sitter-json-src_*.deb "$work/root"
  local src
  src=$(dirname "$(find "$work/root" -name parser.c | head -1)")
  mkdir -p "$out"
  cc -O2 -fPIC -shared -I "$src" -o "$out/libtree-sitter-json.so.tmp" "$src/parser.c"
  mv -f "$out/libtree-sitter-json.so.tmp" "$out/libtree-sitter-json.so"
  rm -rf "$work"
}

# `deps.sh screenshots': what `make screenshots' needs besides the rest, a
# graphical Emacs that can export its frames as PNG (Debian's emacs-gtk is
# a Cairo build; it replaces emacs-nox and runs batch and -nw sessions as
# well) and Xvfb to give it a display.
ensure_screenshots() {
  local missing=()
  command -v Xvfb >/dev/null || missing+=(xvfb)
  command -v xauth >/dev/null || missing+=(xauth)
  if ! { command -v emacs-gtk || command -v emacs-lucid; } >/dev/null; then
    missing+=(emacs-gtk)
  fi
  [ ${#missing[@]} = 0 ] && return
  if is_root && is_debian; then
    say "installing ${missing[*]} for the screenshots"
    if grep -q bookworm /etc/os-release; then
      apt_install -t bookworm-backports "${missing[@]}"
    else
      apt_install "${missing[@]}"
    fi
  else
    die "the screenshots need ${missing[*]} (install them with your package manager)"
  fi
}

# The MCP servers the core's MCP tests run (crates/mevedel-core/src/mcp/),
# pinned, so a new release cannot change what the tests see. npm and the
# venv both install under $deps/mcp; a version change reinstalls.
# conformance stays at 0.1.13: later versions need node 22.
mcp_npm_pkgs=(@modelcontextprotocol/server-everything@2026.8.31
              @modelcontextprotocol/server-filesystem@2026.8.31
              @modelcontextprotocol/conformance@0.1.13)
mcp_pypi_pkgs=(mcp-server-time==2026.10.19)
ensure_mcp_servers() {
  local out=$deps/mcp want
  want="${mcp_npm_pkgs[*]} ${mcp_pypi_pkgs[*]}"
  # A virtualenv's scripts name its absolute path: one made elsewhere (a
  # moved checkout) no longer starts, and is made again.
  [ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ] &&
    [ -x "$(sed -n '1s/^#!//p' "$out/venv/bin/mcp-server-time" 2>/dev/null)" ] && return
  local missing=()
  command -v npm >/dev/null || missing+=(npm)
  python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
  if [ ${#missing[@]} != 0 ]; then
    if is_root && is_debian; then
      say "installing ${missing[*]} for the MCP servers"
      apt_install "${missing[@]}"
    else
      die "the MCP tests need ${missing[*]} (install them with your package manager)"
    fi
  fi
  say "installing ${want} into $out"
  rm -rf "$out"
  mkdir -p "$out/npm"
  npm install --prefix "$out/npm" --no-audit --no-fund --loglevel=error \
    "${mcp_npm_pkgs[@]}" >&2
  python3 -m venv "$out/venv"
  "$out/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "${mcp_pypi_pkgs[@]}" >&2
  [ -x "$out/npm/node_modules/.bin/mcp-server-everything" ] &&
    [ -x "$out/npm/node_modules/.bin/conformance" ] &&
    [ -x "$out/venv/bin/mcp-server-time" ] || die "the MCP servers did not install under $out"
  printf '%s' "$want" > "$out/.stamp"
}

# The ACP agents the core's ACP tests drive (crates/mevedel-core/src/acp/),
# pinned like the MCP servers; a version change reinstalls. Each run of
# the agent is pointed at the scripted model server, never at a network.
acp_npm_pkgs=(@zed-industries/claude-agent-acp@0.23.1)
ensure_acp_agents() {
  local out=$deps/acp want
  want="${acp_npm_pkgs[*]}"
  [ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ] &&
    [ -x "$out/npm/node_modules/.bin/claude-agent-acp" ] && return
  if ! command -v npm >/dev/null; then
    if is_root && is_debian; then
      say "installing npm for the ACP agents"
      apt_install npm
    else
      die "the ACP tests need npm (install it with your package manager)"
    fi
  fi
  say "installing ${want} into $out"
  rm -rf "$out"
  mkdir -p "$out/npm"
  npm install --prefix "$out/npm" --no-audit --no-fund --loglevel=error \
    "${acp_npm_pkgs[@]}" >&2
  [ -x "$out/npm/node_modules/.bin/claude-agent-acp" ] ||
    die "claude-agent-acp did not install under $out"
  printf '%s' "$want" > "$out/.stamp"
}

# The whiteboard page (page/, bundled by `make page') and its browser
# test, pinned like the MCP servers; a version change reinstalls.
shared_npm_pkgs=(@excalidraw/excalidraw@0.18.0 react@19.1.0 react-dom@19.1.0
                 esbuild@0.25.9 playwright-core@1.55.0)
ensure_shared_page() {
  local out=$deps/shared want
  want="${shared_npm_pkgs[*]}"
  [ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ] &&
    [ -d "$out/npm/node_modules/@excalidraw/excalidraw" ] && return
  command -v npm >/dev/null || die "the whiteboard page needs npm (install it with your package manager)"
  say "installing ${want} into $out"
  rm -rf "$out"
  mkdir -p "$out/npm"
  npm install --prefix "$out/npm" --no-audit --no-fund --loglevel=error \
    "${shared_npm_pkgs[@]}" >&2
  [ -d "$out/npm/node_modules/@excalidraw/excalidraw" ] &&
    [ -d "$out/npm/node_modules/playwright-core" ] ||
    die "the whiteboard page's packages did not install under $out"
  printf '%s' "$want" > "$out/.stamp"
}

# Two runs at once (two `make bench', say) take turns here: the second
# finds in place what the first installed, rather than half of it.
mkdir -p "$deps"
exec 8<"$deps"
flock 8
ensure_emacs "$@"
ensure_tools
ensure_cargo
ensure_elpa
ensure_grammars
ensure_mcp_servers
ensure_acp_agents
ensure_shared_page
if want_screenshots "$@"; then
  ensure_screenshots
fi
