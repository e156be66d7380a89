# shellcheck shell=bash
# Sourced by tools/evidence.sh, tools/wsd_toy.sh: one sweep folder's report into docs/results/.

# write_results SWEEPS STEM LINE...: the budgeted-report tables of SWEEPS (one sweep folder, or
# several joined by ":", reported as one grid) into STEM.md, after the
# header LINEs (one per argument) and a blank line, with STEM.csv and the plots STEM*.png; $PY
# is the interpreter. The exit status is the report's; when the report fails, STEM.md is left
# as it was (the report itself refuses before writing its CSV and plots).
write_results() {
    local sweeps stem=$2 tmp code
    IFS=: read -ra sweeps <<< "$1"
    shift 2
    tmp=$(mktemp "$stem.md.XXXXXX") || return 1
    {
        printf '%s\n' "$@" ""
        "$PY" -m budgeted.experiments.report "${sweeps[@]}" --csv "$stem.csv" --plot "$stem.png" \
            | grep -v '^CSV: \|^plot: '
    } > "$tmp"
    code=${PIPESTATUS[0]}
    if [ "$code" = 0 ]; then
        mv "$tmp" "$stem.md"
    else
        rm -f "$tmp"
    fi
    return "$code"
}
