#!/usr/bin/env bash
# `make image`: build the cluster image from docker/Dockerfile with the builder this machine has
# (docs/docker.md): docker (when its daemon answers), else podman, else buildah (installed with
# apt-get when none is here and we are root with apt).
#
# Environment (all optional):
#   IMAGE          the tag (default budgeted-training:latest)
#   IMAGE_BUILDER  docker, podman or buildah (default: the first of them that works here)
#   IMAGE_ARCHIVE  also write the image to a file, for Apptainer or a machine without a registry:
#                  oci-archive:PATH or docker-archive:PATH (plain PATH: oci-archive, with docker
#                  docker-archive); an existing file is not overwritten
#   IMAGE_DRY_RUN  1: print the commands, run nothing
#   CUDA_IMAGE, RUNTIME_IMAGE, DETECTRON2_REQUIREMENT, MMCV_FORCE_CUDA, TORCH_CUDA_ARCH_LIST,
#   MAX_JOBS       passed on as the Dockerfile's build arguments when set
# podman and buildah also get this machine's pip settings, bind-mounted read-only (never copied
# into a layer): the same as `make image-smoke`.
set -euo pipefail

PROG=image
# shellcheck source=tools/image/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE=${IMAGE:-budgeted-training:latest}
BUILDER=${IMAGE_BUILDER:-}
ARCHIVE=${IMAGE_ARCHIVE:-}
DRY_RUN=${IMAGE_DRY_RUN:-0}
BUILD_ARG_NAMES=(CUDA_IMAGE RUNTIME_IMAGE DETECTRON2_REQUIREMENT MMCV_FORCE_CUDA
  TORCH_CUDA_ARCH_LIST MAX_JOBS)

case $DRY_RUN in 0 | 1) ;; *) die "IMAGE_DRY_RUN=$DRY_RUN is invalid; allowed: 0, 1" 2 ;; esac

docker_answers() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

explicit=$BUILDER
case $BUILDER in
  "")
    if docker_answers; then
      BUILDER=docker
    elif command -v podman >/dev/null 2>&1; then
      BUILDER=podman
    else
      APT_PACKAGES="buildah:buildah" ensure_commands buildah
      BUILDER=buildah
    fi
    ;;
  docker | podman | buildah) ;;
  *) die "IMAGE_BUILDER=$BUILDER is invalid; allowed: docker, podman, buildah (empty: the first that works)" 2 ;;
esac

# IMAGE_ARCHIVE: the transport (oci-archive or docker-archive) and the file
archive_format="" archive_path=""
if [ -n "$ARCHIVE" ]; then
  case $ARCHIVE in
    oci-archive:* | docker-archive:*) archive_format=${ARCHIVE%%:*} archive_path=${ARCHIVE#*:} ;;
    *:*) die "IMAGE_ARCHIVE=$ARCHIVE is invalid; allowed: oci-archive:PATH, docker-archive:PATH or a plain PATH" 2 ;;
    *) archive_path=$ARCHIVE archive_format=oci-archive ;;
  esac
  [ "$BUILDER" = docker ] && [ "$ARCHIVE" = "$archive_path" ] && archive_format=docker-archive
  if [ "$BUILDER" = docker ] && [ "$archive_format" = oci-archive ]; then
    die "IMAGE_ARCHIVE=$ARCHIVE: docker writes docker-archive only: use IMAGE_ARCHIVE=docker-archive:$archive_path (Apptainer reads it as docker-archive://$archive_path)" 2
  fi
  [ -n "$archive_path" ] || die "IMAGE_ARCHIVE=$ARCHIVE names no file" 2
  [ -e "$archive_path" ] && die "IMAGE_ARCHIVE: $archive_path exists; remove it or name another file" 2
  [ -d "$(dirname "$archive_path")" ] || die "IMAGE_ARCHIVE: the folder $(dirname "$archive_path") does not exist" 2
fi

if [ -n "$explicit" ] && [ "$DRY_RUN" = 0 ]; then
  if [ "$BUILDER" = docker ]; then
    docker_answers || die "IMAGE_BUILDER=docker, but no Docker daemon answers here ('docker info' failed): start one, or use IMAGE_BUILDER=podman or buildah"
  else
    command -v "$BUILDER" >/dev/null 2>&1 \
      || die "IMAGE_BUILDER=$BUILDER, but $BUILDER is not installed: install it (Debian/Ubuntu: apt-get install -y $BUILDER), then run it again"
  fi
fi

build=("$BUILDER")
case $BUILDER in
  docker) build+=(build) ;;
  podman) build+=(build --format docker) ;;  # OCI format drops SHELL
  buildah) build+=(bud --format docker --isolation chroot --layers) ;;
esac
for name in "${BUILD_ARG_NAMES[@]}"; do
  [ -n "${!name+set}" ] && build+=(--build-arg "$name=${!name}")
done
if [ "$BUILDER" != docker ]; then
  while IFS= read -r word; do build+=("$word"); done < <(pip_setting_mounts)
fi
build+=(-f docker/Dockerfile -t "$IMAGE" .)

save=()
if [ -n "$archive_path" ]; then
  case $BUILDER in
    docker) save=(docker save -o "$archive_path" "$IMAGE") ;;
    podman) save=(podman save --format "$archive_format" -o "$archive_path" "$IMAGE") ;;
    buildah)
      target="$archive_format:$archive_path"
      [ "$archive_format" = docker-archive ] && target="$target:$IMAGE"
      save=(buildah push "$IMAGE" "$target")
      ;;
  esac
fi

if [ "$DRY_RUN" = 1 ]; then
  printf '+ (cd %q &&' "$ROOT"
  printf ' %q' "${build[@]}"
  printf ')\n'
  if [ ${#save[@]} -gt 0 ]; then
    printf '+'
    printf ' %q' "${save[@]}"
    printf '\n'
  fi
  exit 0
fi

say "building $IMAGE with $BUILDER (docker/Dockerfile; the first build compiles mmcv's CUDA ops: long)"
t0=$(date +%s)
(cd "$ROOT" && "${build[@]}") || die "the $BUILDER build of $IMAGE failed (its output is above; a base image that cannot be pulled: set CUDA_IMAGE and RUNTIME_IMAGE)"
seconds=$(($(date +%s) - t0))
case $BUILDER in
  docker | podman) size=$(human_bytes "$("$BUILDER" image inspect --format '{{.Size}}' "$IMAGE")") ;;
  buildah) size=$(buildah images --noheading --format '{{.Size}}' "$IMAGE" | head -n 1) ;;
esac
say "built $IMAGE in $(human_seconds "$seconds"): $size"
if [ ${#save[@]} -gt 0 ]; then
  say "writing $archive_format:$archive_path"
  "${save[@]}"
  say "wrote $archive_path ($(human_bytes "$(stat -c %s "$archive_path")")); Apptainer: apptainer build budgeted.sif $archive_format://$archive_path"
fi
say "next: docs/docker.md (run it with docker/podman, Apptainer or enroot/pyxis)"
