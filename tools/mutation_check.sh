#!/usr/bin/env bash
# Mutation check: plant small bugs in the schedule math, the budget arithmetic, the resume checks
# and the safe loaders (mutmut), run their fast tests against each, and count the survivors.
#
#   bash tools/mutation_check.sh                      # the default modules below
#   bash tools/mutation_check.sh schedules/units.py   # only these (under plugins/budgeted/)
#
# Works in a scratch copy (output/mutation/), never in the checkout; mutmut is installed there
# too, not into .venv. Prints the survivors and one summary line:
#   mutation check: N mutants, K killed, S survived, ...
# and writes output/mutation/survivors.txt: each mutant not killed, with the -/+ lines of its diff
# (the whole diff: cd output/mutation/tree, then mutmut show NAME as the mutmut() below runs it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
WORK=${MUTATION_DIR:-$ROOT/output/mutation}
MUTMUT=mutmut==3.8.1
MODULES=("$@")
# the schedule math and budget arithmetic (schedules/), the resume checks (schedules/, pytorch.py)
# and the safe loaders and writers (safety/loading.py, writing.py, checkpoint_files.py), against
# their fast tests
cd "$ROOT/plugins/budgeted"
[ ${#MODULES[@]} -gt 0 ] || MODULES=(schedules/*.py pytorch.py safety/{loading,writing,checkpoint_files}.py)
cd "$ROOT"
TESTS=(tests/schedules/test_*.py tests/test_pytorch.py tests/safety/test_checkpoints.py)

[ -x "$PY" ] || { echo "mutation check: no Python at $PY; run make setup first" >&2; exit 2; }
for m in "${MODULES[@]}"; do
  [ -f "$ROOT/plugins/budgeted/$m" ] || {
    echo "mutation check: no module plugins/budgeted/$m; allowed: a file such as schedules/budget.py" >&2
    exit 2
  }
done

LIB=$WORK/lib
if [ ! -d "$LIB/mutmut" ]; then
  echo "[mutation] installing $MUTMUT into $LIB (not into the venv)"
  "$PY" -m pip install -q --disable-pip-version-check --target "$LIB" "$MUTMUT" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
fi

TREE=$WORK/tree
rm -rf "$TREE" && mkdir -p "$TREE/src" "$TREE/tests"
cp -r "$ROOT/plugins/budgeted" "$TREE/src/budgeted"
(cd "$ROOT" && cp --parents tests/conftest.py "${TESTS[@]}" "$TREE/")
{
  echo "[mutmut]"
  echo "source_paths=src/budgeted"
  echo "only_mutate="
  for m in "${MODULES[@]}"; do echo "    src/budgeted/$m"; done
  echo "pytest_add_cli_args_test_selection="
  for t in "${TESTS[@]}"; do echo "    $t"; done
  echo "pytest_add_cli_args="
  echo "    -p"
  echo "    no:cacheprovider"
  echo "    -q"
} > "$TREE/setup.cfg"

cd "$TREE"
export BUDGETED_CONFIGS=$ROOT/configs OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# mutmut's own dependencies come after the venv's packages (its pytest is not the venv's)
mutmut() { "$PY" -c "import sys; sys.path.append('$LIB'); sys.argv[0] = 'mutmut'
from mutmut.__main__ import cli; cli()" "$@"; }
start=$(date +%s)
mutmut run > "$WORK/run.log" 2>&1 || { tail -20 "$WORK/run.log" >&2; exit 1; }
mutmut results --all true > "$WORK/results.txt" 2>&1 || true
grep -E ": survived$" "$WORK/results.txt" | sed 's/^ *//' || true
# every mutant not killed, with the -/+ lines of its diff, for a reviewer to read
"$PY" - "$LIB" > "$WORK/survivors.txt" <<'PYEOF'
import sys
sys.path.append(sys.argv[1])
from mutmut.__main__ import status_by_exit_code
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.utils.file_utils import walk_mutatable_files

for path in walk_mutatable_files():
    data = SourceFileMutationData(path=path)
    data.load()
    for name, code in data.exit_code_by_key.items():
        status = status_by_exit_code[code]
        if status == "killed":
            continue
        print(f"{name}: {status}")
        for line in get_diff_for_mutant(name, path=path).splitlines():
            if line[:1] in "-+" and line[:3] not in ("---", "+++"):
                print(f"    {line[0]} {line[1:].strip()}")
PYEOF
echo "[mutation] every mutant not killed, with its diff: $WORK/survivors.txt"
"$PY" - "$WORK/results.txt" "$(( $(date +%s) - start ))" <<'PYEOF'
import collections, sys
states = collections.Counter(
    line.rsplit(": ", 1)[1].strip() for line in open(sys.argv[1]) if ": " in line
)
total = sum(states.values())
rest = ", ".join(f"{n} {s}" for s, n in sorted(states.items()) if s not in ("killed", "survived"))
print(f"mutation check: {total} mutants, {states['killed']} killed, {states['survived']} survived"
      + (f", {rest}" if rest else "") + f" ({sys.argv[2]} s)")
PYEOF
