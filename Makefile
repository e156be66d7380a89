# budgeted-training: `make setup`, `make demo`, `make test` (see README.md).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done
SETUP_INPUTS := tools/setup_env.sh setup.py pyproject.toml $(wildcard requirements/*.txt tools/detectron2_lite/*.py)

# Bytecode caching makes importing mmcv/mmseg/detectron2 several seconds faster per process.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup test test-fast lint demo bench evidence digits paper clean image image-smoke slurm-up slurm-down

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	@test -x $(PY) || { echo "[setup] creating $(VENV)"; python3 -m venv $(VENV); }
	PYTHON=$(PY) bash tools/setup_env.sh
	@touch $@

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/hadolint docker/Dockerfile

# Three pytest-xdist workers, one compute thread each, whole test files each (module fixtures are
# built once), the long files handed out first (by number of e2e, then integration tests;
# tests/conftest.py): the workers end together. Three on 2 cores, because many e2e tests wait
# (deadlines, signals, the Slurm queue): pytest took 665 s with 3, 708 s with 2 (clean clone,
# 2026-11-29). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 3

# Tracebacks without column carets in the tests: on Python 3.11 before 3.11.8 (3.11.7 here),
# formatting a caret ast.parse()s the line, and an exception raised in a finalizer during garbage
# collection inside another ast.parse() (MMEngine parses every config it loads) makes that outer
# parse fail with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905),
# failing an unrelated test. Seen once in CI; docs/development.md.
test test-fast: export PYTHONNODEBUGRANGES := 1

test: lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The unit tier only (tests/tiers.py: in-process, no subprocess, no framework trainer).
test-fast: setup
	$(PY) -m pytest -m unit -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

demo: setup
	$(PY) tools/demo.py

bench: setup
	$(PY) benchmarks/scheduler_overhead.py

# The toy evidence grid (docs/results/), in the background; resumable: run it again to go on.
evidence: setup
	@mkdir -p output/evidence
	nohup env PYTHON=$(PY) bash tools/evidence.sh >> output/evidence/evidence.log 2>&1 &
	@echo "[evidence] running in the background; follow: tail -f output/evidence/evidence.log"

# The real-data grid (docs/digits.md): 5 schedules x 6 budgets x 6+ base LRs x 5 seeds of LeNet-5 on
# the UCI digits, two runs at a time, then the report; resumable: run it again to go on.
digits: setup
	PYTHON=$(PY) bash tools/digits_grid.sh

# The paper on two real data sets (docs/paper.md): the grid fixed in tools/paper/grid.toml (Table 2
# with the arms of 2026, the best checkpoint, AdamW/AMSGrad, batch 128) on the UCI digits and
# MNIST-5k, two runs at a time, each forked from a sweep that imported torch once; then
# docs/paper.md's tables and figures. Resumable: run it again to go on (output/paper).
paper: setup
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) tools/paper/run.py

# The cluster image (docs/docker.md). `make image`: the real one, with docker, podman or buildah
# (IMAGE, IMAGE_BUILDER, IMAGE_ARCHIVE, IMAGE_DRY_RUN=1 and the Dockerfile's build arguments
# from the environment: tools/image/build.sh). `make image-smoke`: the CPU build here, without a
# daemon or a registry (buildah, a debootstrapped base; root), its checks inside, then removed.
image:
	bash tools/image/build.sh

image-smoke:
	bash tools/image/smoke.sh

# A real one-node Slurm cluster on this machine for tests/slurm/ (docs/slurm.md; root: installs
# Debian's slurmctld, slurmd, slurm-client and munge if missing). Clients need the SLURM_CONF
# line that slurm-up prints exported (the tests find the cluster without it).
slurm-up:
	bash tools/slurm/local_cluster.sh start

slurm-down:
	bash tools/slurm/local_cluster.sh stop

clean:
	rm -rf $(VENV) output
