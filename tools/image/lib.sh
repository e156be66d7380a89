# Shared by tools/image/build.sh (`make image`) and tools/image/smoke.sh (`make image-smoke`).
# Sourced, not run. The caller sets PROG (the name its one-line messages start with).
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

say() { printf '[%s %s] %s\n' "$PROG" "$(date +%H:%M:%S)" "$*"; }

# One line on stderr, then exit with $2 (default 1).
die() {
  printf '%s: %s\n' "$PROG" "$1" >&2
  exit "${2:-1}"
}

# "7.81 GB" for 7810000000 (decimal units, as `df -H` and the registries count).
human_bytes() {
  awk -v b="$1" 'BEGIN { split("B kB MB GB TB", u); i = 1; while (b >= 1000 && i < 5) { b /= 1000; i++ }
    printf (i == 1 ? "%d %s" : "%.2f %s"), b, u[i] }'
}

# Bytes free on the file system that holds folder $1.
free_bytes() { df -P -B1 "$1" | awk 'NR == 2 { print $4 }'; }

# "3 min 54 s" for 234.
human_seconds() {
  if [ "$1" -ge 60 ]; then printf '%d min %d s' $(($1 / 60)) $(($1 % 60)); else printf '%d s' "$1"; fi
}

# Make sure every command named is on the PATH. Missing ones are installed with apt-get when
# we are root and apt-get works (APT_PACKAGES names the Debian package of each command, as
# "command:package" words); otherwise one line says what to install.
ensure_commands() {
  local missing=() packages=() cmd pkg
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null 2>&1 && continue
    missing+=("$cmd")
    pkg=$cmd
    for pair in ${APT_PACKAGES:-}; do
      [ "${pair%%:*}" = "$cmd" ] && pkg=${pair#*:}
    done
    packages+=("$pkg")
  done
  [ ${#missing[@]} = 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${packages[*]} with apt-get (${missing[*]} not found)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >/dev/null 2>&1 \
        || die "needs ${missing[*]}, and 'apt-get install -y ${packages[*]}' failed: install them, then run it again"
    fi
    for cmd in "${missing[@]}"; do
      command -v "$cmd" >/dev/null 2>&1 || die "needs $cmd, which 'apt-get install -y ${packages[*]}' did not provide"
    done
  else
    die "needs ${missing[*]}: install them (Debian/Ubuntu, as root: apt-get install -y ${packages[*]}), then run it again"
  fi
}

# The read-only bind mounts (`-v SRC:SRC:ro` words, one per line) that give pip inside a build
# this machine's pip settings: the config files pip reads and every existing absolute path
# those settings (and PIP_* variables) name: the constraints file, the CA bundle, find-links
# folders, local indexes (a file:// index's parent folder: its links point beside it, at
# ../../files/). Nothing is copied into a layer; empty where pip has none.
pip_setting_mounts() {
  local pip=(python3 -m pip) paths=() path key value word seen=" "
  "${pip[@]}" --version >/dev/null 2>&1 || return 0
  # "  /etc/pip.conf, exists: True" lines of `pip config debug`
  while IFS= read -r path; do
    paths+=("$path")
  done < <("${pip[@]}" config debug 2>/dev/null | sed -n 's/^ *\(\/[^,]*\), exists: True$/\1/p')
  # `pip config list` (global.key='value') and PIP_* variables (PIP_KEY=value), as "key value"
  while read -r key value; do
    for word in $value; do
      case $word in file://*) word=${word#file://} ;; esac
      case $key in *index-url | *INDEX_URL) word=$(dirname "$word") ;; esac
      case $word in /*) [ -e "$word" ] && paths+=("$word") ;; esac
    done
  done < <(
    "${pip[@]}" config list 2>/dev/null | sed -n "s/^\([^=]*\)='\(.*\)'$/\1 \2/p"
    env | sed -n 's/^\(PIP_[A-Z_]*\)=/\1 /p'
  )
  for path in "${paths[@]}"; do
    case $seen in *" $path "*) continue ;; esac
    seen="$seen$path "
    printf -- '-v\n%s:%s:ro\n' "$path" "$path"
  done
}

# The folder holding a prebuilt CPU mmcv-2.1.0 wheel for Python 3.11 (the one tools/setup_env.sh
# would use: the shared wheelhouse, else its build cache), or nothing.
mmcv_wheel_folder() {
  local folder
  for folder in "${WHEELHOUSE-$ROOT/../shared/wheelhouse}" \
    "${BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/budgeted-training}"; do
    [ -n "$folder" ] || continue
    if compgen -G "$folder/mmcv-2.1.0-cp311-cp311-*.whl" >/dev/null; then
      (cd "$folder" && pwd)
      return 0
    fi
  done
}
