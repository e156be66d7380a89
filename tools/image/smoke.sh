#!/usr/bin/env bash
# `make image-smoke`: build docker/Dockerfile here, on a machine without a Docker daemon, a
# container registry or a GPU, and check the image it makes (docs/docker.md).
#
#   1. a Debian bookworm base made without a registry (debootstrap --variant=minbase), imported
#      with `buildah from scratch` + `buildah commit`;
#   2. `buildah bud --isolation chroot --format docker` of docker/Dockerfile with the CPU smoke
#      build arguments (that base for both stages, MMCV_FORCE_CUDA=0, the prebuilt CPU mmcv wheel
#      of ../shared/wheelhouse or of the build cache mounted read-only); overlay storage in a
#      folder of our own; this machine's pip settings bind-mounted read-only, never copied;
#   3. tools/image/checks.py inside the image (imports, every console script's --help, the toy
#      Mask R-CNN and the toy PSPNet budgets to their end with the LR checked against
#      budgeted.lr_multiplier, a refusal in one line), with a host folder mounted at /datasets;
#   4. the image size, the build time and the storage peak; then everything it stored
#      (containers, images, the storage folder, the base rootfs) is removed, also on failure.
#
# Needs root, buildah and debootstrap (installed with apt-get when missing and apt works), and
# IMAGE_SMOKE_MIN_FREE_GB of free disk where it stores (default 45; its storage peaked at 33 GB).
# Environment: IMAGE_SMOKE_DIR (the parent folder of its storage; default /var/tmp),
# IMAGE_SMOKE_MIN_FREE_GB, IMAGE_SMOKE_KEEP=1 (keep the storage and the image, for a look:
# the last line says how to remove them), DEBIAN_MIRROR (default: the one apt uses here),
# WHEELHOUSE / BUILD_CACHE (where the prebuilt mmcv wheel is looked for, as tools/setup_env.sh).
set -euo pipefail

PROG=image-smoke
# shellcheck source=tools/image/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PARENT=${IMAGE_SMOKE_DIR:-/var/tmp}
MIN_FREE_GB=${IMAGE_SMOKE_MIN_FREE_GB:-45}
SUITE=bookworm  # Python 3.11, as the Dockerfile needs
BASE=localhost/budgeted-smoke-base:$SUITE
IMAGE=localhost/budgeted-training:smoke
APT_PACKAGES="buildah:buildah debootstrap:debootstrap"
started=$(date +%s)

# --- before anything is stored: root, settings, disk, tools ------------------------------
[ "$(id -u)" = 0 ] || die "needs root (buildah --isolation chroot and debootstrap): run it as root"
case $MIN_FREE_GB in '' | *[!0-9]*) die "IMAGE_SMOKE_MIN_FREE_GB=$MIN_FREE_GB is invalid; allowed: a whole number of GB" 2 ;; esac
[ -d "$PARENT" ] || die "IMAGE_SMOKE_DIR=$PARENT is not a folder" 2
free=$(free_bytes "$PARENT")
if [ "$free" -lt $((MIN_FREE_GB * 1000 ** 3)) ]; then
  die "needs ${MIN_FREE_GB} GB free in $PARENT (its storage peaks at about 33 GB); $(human_bytes "$free") are free: free some, or set IMAGE_SMOKE_DIR to a folder on a larger disk"
fi
ensure_commands buildah debootstrap
# the first Debian archive apt uses here ("deb URI ..." or deb822 "URIs: URI" lines)
mirror=${DEBIAN_MIRROR:-$({ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
  /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | awk '$1 == "deb" || $1 == "URIs:" {
    for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\/.*\/debian\/?$/) { print $i; exit } }')}
mirror=${mirror:-http://deb.debian.org/debian}
wheels=$(mmcv_wheel_folder || true)

WORK="" STORE=() sampler=""

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [ -n "$WORK" ] || exit "$rc"
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
  fi
  if [ "${IMAGE_SMOKE_KEEP:-0}" = 1 ]; then
    say "kept $WORK (IMAGE_SMOKE_KEEP=1); remove it with: buildah ${STORE[*]} rm --all; buildah ${STORE[*]} rmi --all --force; rm -rf $WORK"
    exit "$rc"
  fi
  buildah "${STORE[@]}" rm --all >/dev/null 2>&1 || true
  buildah "${STORE[@]}" rmi --all --force >/dev/null 2>&1 || true
  # whatever is still mounted below WORK (a build killed mid-step) must go before rm -rf
  findmnt -rn -o TARGET | grep -F "$WORK/" | sort -r | while IFS= read -r target; do
    umount -l "$target" 2>/dev/null || true
  done
  rm -rf "$WORK" 2>/dev/null || rm -rf "$WORK" || true
  if [ -e "$WORK" ]; then
    echo "$PROG: could not remove $WORK: remove it by hand" >&2
  else
    say "removed its storage ($WORK: containers, images, base rootfs)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WORK=$(mktemp -d "$PARENT/budgeted-image-smoke.XXXXXX")
STORE=(--root "$WORK/storage" --runroot "$WORK/run" --storage-driver overlay)
# buildah's temporary files (a committed layer's tar stream: gigabytes) go there too
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"

# The storage peak: the largest size of WORK (everything it stores is there), sampled every
# 10 s in the background.
(
  peak=0
  while sleep 10 && [ -d "$WORK" ]; do
    # du complains (and fails) about files that vanish while it counts: its sum still holds
    now=$(du -sxb "$WORK" 2>/dev/null | cut -f1 || true)
    if [ "${now:-0}" -gt "$peak" ]; then
      peak=$now
      echo "$peak" >"$WORK/peak"
    fi
  done
) &
sampler=$!
image_size() { buildah "${STORE[@]}" images --noheading --format '{{.Size}}' "$1" | head -n 1; }

say "storage: $WORK ($(human_bytes "$free") free); Debian mirror: $mirror"

# --- 1. the base image, without a registry ----------------------------------------------------
say "debootstrap --variant=minbase $SUITE (the base image, made without a registry)"
t0=$(date +%s)
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$WORK/rootfs" "$mirror" \
  >"$WORK/debootstrap.log" 2>&1 || {
  tail -n 20 "$WORK/debootstrap.log" >&2
  die "debootstrap of $SUITE from $mirror failed (the end of its log is above); set DEBIAN_MIRROR to a mirror that works"
}
rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
ctr=$(buildah "${STORE[@]}" from scratch)
mnt=$(buildah "${STORE[@]}" mount "$ctr")
tar -C "$WORK/rootfs" -cf - . | tar -C "$mnt" -xpf -
buildah "${STORE[@]}" umount "$ctr" >/dev/null
buildah "${STORE[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --cmd bash "$ctr"
buildah "${STORE[@]}" commit --quiet --format docker --rm "$ctr" "$BASE" >/dev/null
rm -rf "$WORK/rootfs"
say "base $BASE: $(image_size "$BASE") in $(human_seconds $(($(date +%s) - t0)))"

# --- 2. the image -----------------------------------------------------------------------------
build_args=(--build-arg "CUDA_IMAGE=$BASE" --build-arg "RUNTIME_IMAGE=$BASE"
  --build-arg MMCV_FORCE_CUDA=0 --build-arg "MAX_JOBS=$(nproc)")
mounts=()
while IFS= read -r word; do mounts+=("$word"); done < <(pip_setting_mounts)
pip_mounts=("${mounts[@]}")
say "pip settings of this machine, mounted read-only: $(printf '%s\n' "${pip_mounts[@]}" | sed -n 's/:ro$//; s/:.*//p' | tr '\n' ' ')"
if [ -n "$wheels" ]; then
  say "mmcv: the prebuilt CPU wheel in $wheels (mounted read-only at /wheelhouse)"
  build_args+=(--build-arg WHEELHOUSE=/wheelhouse)
  mounts+=(-v "$wheels:/wheelhouse:ro")
else
  say "mmcv: no prebuilt CPU wheel in ${WHEELHOUSE-$ROOT/../shared/wheelhouse} or the build cache: the build compiles it (30-50 min on 2 cores)"
fi
say "buildah bud --isolation chroot --format docker: docker/Dockerfile (two stages)"
t0=$(date +%s)
(cd "$ROOT" && buildah "${STORE[@]}" bud --isolation chroot --format docker --pull=never \
  --layers=false "${build_args[@]}" "${mounts[@]}" -f docker/Dockerfile -t "$IMAGE" .)
build_seconds=$(($(date +%s) - t0))
size=$(image_size "$IMAGE")
say "built $IMAGE in $(human_seconds "$build_seconds"): $size"

# The mounted settings are in no layer: in the image each mounted path is absent, an empty
# mount point, or what the base image has there (the distribution's own CA bundle).
ctr=$(buildah "${STORE[@]}" from --pull-never "$IMAGE")
mnt=$(buildah "${STORE[@]}" mount "$ctr")
base_ctr=$(buildah "${STORE[@]}" from --pull-never "$BASE")
base_mnt=$(buildah "${STORE[@]}" mount "$base_ctr")
for word in "${pip_mounts[@]}"; do
  [ "$word" = -v ] && continue
  path=${word%%:*}
  if [ -f "$path" ] && [ -s "$mnt$path" ] && cmp -s "$path" "$mnt$path" \
    && ! cmp -s "$base_mnt$path" "$mnt$path"; then
    die "$path of this machine is in the image: a pip setting was copied into a layer"
  elif [ -d "$path" ] && [ "$(ls -A "$mnt$path" 2>/dev/null)" != "$(ls -A "$base_mnt$path" 2>/dev/null)" ]; then
    die "$path of this machine has files in the image: a pip setting was copied into a layer"
  fi
done
buildah "${STORE[@]}" umount "$ctr" "$base_ctr" >/dev/null
buildah "${STORE[@]}" rm "$base_ctr" >/dev/null
say "none of the mounted pip settings is in the image (mount points, if any, are empty)"

# --- 3. the checks, inside the image ----------------------------------------------------------
mkdir -p "$WORK/datasets"
say "tools/image/checks.py inside the image (a host folder at /datasets)"
buildah "${STORE[@]}" run --isolation chroot -v "$WORK/datasets:/datasets" "$ctr" -- \
  python tools/image/checks.py

# --- 4. the figures ---------------------------------------------------------------------------
peak=$(cat "$WORK/peak" 2>/dev/null || echo 0)
say "image size $size; build time $(human_seconds "$build_seconds"); storage peak $(human_bytes "$peak") (du of $WORK, sampled every 10 s); total $(human_seconds $(($(date +%s) - started)))"
say "passed"
