"""A sweep's grid: ``--schedules`` (arms, :mod:`~budgeted.experiments.arms`) x
``--optimizers`` x budgets x seeds x base LRs (``--lrs``, ``--lrs-for``), each checked against
the family and ``--out`` before anything runs; one-line :class:`~budgeted.errors.SweepError`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ...config_files import config_root
from ...errors import SweepError
from ..arms import arm_flags, cell_texts, check_arm, lrs_for, parse_cell, validate_overrides
from ..families import ConfigFamily
from ..own import check_own_budgets, check_same_source
from .commands import SCHEDULER_KEYS, check_extra
from .plan import (
    DEFAULT_SCHEDULES,
    config_schedule,
    describe,
    family_configs,
    parse_budget,
    parse_lr,
    parse_seed,
)
from .records import SWEEP_FILE, SWEEP_LOCK, CellKey, family_label, read_sweep

__all__ = ["check_grid", "check_schedules", "parse_every"]


def check_schedules(fam: ConfigFamily, configs: dict, texts: list[str],
                    budgets: list[float], extra: list[str]) -> None:  # fmt: skip
    """Every cell's text (:mod:`~budgeted.experiments.arms`) is one the family's tools train, at
    every budget, in a folder of its own; one trained from the linear configs leaves ``extra`` the
    scheduler's name. Raises :class:`SweepError`."""
    key = SCHEDULER_KEYS.get(fam.tool, "")
    clash = [t for t in extra if key and t.split("=", 1)[0] == key]
    if fam.source and not fam.script and clash:  # every cell of one's own config sets it
        raise SweepError(f"override {clash[0]!r} after -- would replace the scheduler each cell "
                         f"sets (--schedules); allowed: no {key} override")  # fmt: skip
    folders: dict[str, str] = {}
    for text in texts:
        try:
            arm = parse_cell(text)
            check_arm(arm, fam.framework)
        except ValueError as err:
            raise SweepError(str(err)) from None
        same = folders.setdefault(arm.folder, text)
        if same != text:
            raise SweepError(f"--schedules {same} and {text} would share the cell folders "
                             f"{arm.folder}_*; allowed: one of them")  # fmt: skip
        if fam.source or fam.script:  # one file (config or script) trains every cell
            continue
        needs = config_schedule(fam, arm)
        switched = needs != arm.schedule and arm.kind != "schedulefree"
        if switched and clash:
            raise SweepError(
                f"override {clash[0]!r} after -- would replace the scheduler of --schedules "
                f"{text} (trained from the linear configs); allowed: no {key} override, or "
                f"--schedules {' '.join(fam.schedules)} only"
            )
        missing = [b for b in budgets if (needs, b) not in configs]
        if missing:
            through = f", which {text!r} trains from" if needs != arm.schedule else ""
            raise SweepError(
                f"no committed config for schedule {arm.schedule!r} at budget {missing[0]:g} "
                f"(configs/{fam.filename(missing[0], needs)} does not exist{through}); "
                f"committed: {describe(configs)}"
            )


def check_grid(args: argparse.Namespace, extra: list[str]) -> list[tuple[str, float]]:
    """The (schedule, budget) cells, smallest budgets first, after checking the arguments and
    ``--out``; raises :class:`SweepError`."""
    fam = args.family
    configs = family_configs(fam)
    label = family_label(fam)
    shipped = not (fam.script or fam.source)  # else one file trains every arm
    default = sorted({s for s, _ in configs}) if shipped else DEFAULT_SCHEDULES
    schedules = list(dict.fromkeys(args.schedules or default))
    if not schedules:  # a shipped family's config folder holding none of its configs
        raise SweepError(
            f"the sweep plans no cell: {config_root() / fam.folder} holds none of the {fam.name} "
            f"family's configs ({fam.prefix}*{fam.ext}); allowed: a config root with them (the "
            "checkout's configs/ or $BUDGETED_CONFIGS)"
        )
    budgets = sorted({parse_budget(b, fam) for b in args.budgets or map(str, fam.fractions)})
    try:
        texts = cell_texts(schedules, args.optimizers)
        per_word = lrs_for(args.lrs_for or [], texts)
    except ValueError as err:
        raise SweepError(str(err)) from None
    check_schedules(fam, configs, texts, budgets, extra)
    args.validate_every = parse_every(args.validate_every)
    arms = [parse_cell(t) for t in texts]
    flags = {t for arm in arms for t in arm_flags(arm, 1.0) if t.startswith("--")}
    flags |= {t.split("=", 1)[0] for t in validate_overrides(fam.tool, args.validate_every)[:1]}
    lrs_given = bool(args.lrs or per_word)
    check_extra(fam.tool, extra, lrs=lrs_given, seeds=bool(args.seeds), more=sorted(flags))
    if fam.source:
        check_own_budgets(fam, budgets)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file; allowed: a new folder or a sweep folder")
    record = out / SWEEP_FILE
    if record.is_file():
        meta = read_sweep(out).meta  # every record and cell folder checked
        if (meta["framework"], meta["family"]) != (fam.framework, label):
            raise SweepError(
                f"--out {out} holds a {meta['framework']} sweep of {meta['family']}; allowed: "
                f"a new folder, or a sweep of {fam.framework} {label}"
            )
        if fam.source:
            check_same_source(
                out, meta.get("experiment") or {}, fam, getattr(args, "force_source", False)
            )
        seeded = {isinstance(cell, list) and len(cell) > 3 and cell[3] is not None
                  for cell in meta.get("cells") or []}  # fmt: skip
        if seeded - {bool(args.seeds)}:
            before = "at the configs' own seed" if args.seeds else "at --seeds"
            raise SweepError(
                f"--out {out} holds runs {before}, which the report cannot pair with runs "
                f"{'at' if args.seeds else 'without'} --seeds; allowed: "
                f"{'no --seeds' if args.seeds else '--seeds'}, as before, or a new folder"
            )
    elif out.is_dir() and any(p.name != SWEEP_LOCK for p in out.iterdir()):
        raise SweepError(f"--out {out} is a folder holding other files; allowed: a new or empty "
                         "folder, or a sweep folder")  # fmt: skip
    lrs: list[float | None] = [None]
    if args.lrs:
        lrs = list(dict.fromkeys(parse_lr(t) for t in args.lrs))
    grids = {w: list(dict.fromkeys(parse_lr(t) for t in ts)) for w, ts in per_word.items()}
    # --lrs-for: the LRs of a cell's text, else of its arm, else of its optimizer, else --lrs
    lrs_of = {t: next((grids[w] for w in (t, *t.split("@")) if w in grids), lrs) for t in texts}
    seeds = list(dict.fromkeys(parse_seed(t) for t in args.seeds)) if args.seeds else [None]
    # a table's rows fill in order: budget, then seed (a whole replicate), then schedule and LR
    return [
        CellKey(t, b, lr, seed)
        for b in budgets
        for seed in seeds
        for t in texts
        for lr in lrs_of[t]
    ]


def parse_every(text: str | None) -> int | None:
    """``--validate-every K``: a whole number >= 1 (None without it); :class:`SweepError`."""
    if text is None:
        return None
    if not (str(text).isascii() and str(text).isdigit() and int(text) >= 1):
        raise SweepError(f"--validate-every {text!r} is invalid; allowed: a whole number >= 1 "
                         "(iterations between validations)")  # fmt: skip
    return int(text)
