# shellcheck shell=bash
# Sourced by tools/evidence.sh, tools/wsd_toy.sh: one sweep folder's report into docs/results/.

# write_results SWEEP STEM LINE...: the budgeted-report tables of SWEEP into STEM.md, after the
# header LINEs (one per argument) and a blank line, with STEM.csv and the plots STEM*.png; $PY
# is the interpreter. The exit status is the report's.
write_results() {
    local sweep=$1 stem=$2
    shift 2
    {
        printf '%s\n' "$@" ""
        "$PY" -m budgeted.report "$sweep" --csv "$stem.csv" --plot "$stem.png" \
            | grep -v '^CSV: \|^plot: '
    } > "$stem.md"
    return "${PIPESTATUS[0]}"
}
