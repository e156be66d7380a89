"""``budgeted-sweep --executor slurm``: each cell one Slurm job, submitted through submitit as
one job array, each running the local executor's command with the framework's launcher across
the job's GPUs and nodes (docs/slurm.md).

This module is the controller: it holds the sweep lock, checks the cluster before writing
anything (:mod:`.slurm_options`), records each cell's job id in its ``sweep_cell.json``, then
waits for the jobs (or exits: ``--detach``). What a cell came to is read from its record and
run folder as JSON, never from submitit's pickles. The job itself: :mod:`.slurm_job`.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...safety.preemption import PREEMPTED_EXIT_CODE, signal_name
from .commands import MMENGINE_FRAMEWORKS, short
from .execute import ended_status, skip_text, utc_now
from .plan import Plan, cell_source, family_configs
from .records import metrics_text, read_cell_record, read_final
from .slurm_job import CellJob
from .slurm_options import SLURM_FOLDER, SlurmOptions
from .status import (
    LIVE_STATES,
    ended_state,
    job_of,
    queue_answer,
    record_job_end,
    update_cell_record,
)

__all__ = ["SLURM_PATIENCE_S", "cell_jobs", "patience_s", "run_on_slurm", "show_options"]

SLURM_PATIENCE_S = 600.0
"""How long the controller waits for a Slurm that does not answer before it exits 75 (the jobs go
on; rerun to collect them): :func:`patience_s`."""


class _Stop(Exception):
    """SIGINT / SIGTERM to the controller while it waits: the jobs go on."""


def _executor(out: Path, options: SlurmOptions, framework: str, cells: int) -> Any:
    import submitit

    tasks = options.gpus_per_node if (
        framework in MMENGINE_FRAMEWORKS and options.nodes * options.gpus_per_node > 1
    ) else 1  # fmt: skip
    executor = submitit.SlurmExecutor(folder=out / SLURM_FOLDER / "%j", max_num_timeout=20)
    params: dict[str, Any] = {
        "job_name": f"sweep:{out.name}",
        "time": options.time_min,
        "nodes": options.nodes,
        "ntasks_per_node": tasks,
        "stderr_to_stdout": True,
        "array_parallelism": max(cells, 1),
        **options.named,
    }
    for key in ("partition", "cpus_per_task", "mem", "account", "qos"):
        if getattr(options, key) is not None:
            params[key] = getattr(options, key)
    if options.gpus_per_node:
        params["gpus_per_node"] = options.gpus_per_node
    if options.extra:
        params["additional_parameters"] = dict(options.extra)
    executor.update_parameters(**params)
    return executor


def _stop_on_signals() -> dict[int, Any]:
    def raise_stop(signum: int, frame: Any) -> None:
        raise _Stop(signal_name(signum))

    return {s: signal.signal(s, raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}


def cell_jobs(
    plans: Sequence[Plan], configs: dict[tuple[str, float], Path], data: Path | None,
    extra: Sequence[str], env: dict[str, str], options: SlurmOptions,
) -> list[CellJob]:  # fmt: skip
    """One Slurm job per cell, training what the local executor trains
    (:func:`~.plan.cell_source`: the cell's config, or the linear one with its scheduler name)."""
    jobs = []
    for plan in plans:
        every = plan.spec.get("validate_every")
        config, switch = cell_source(plan.family, configs, plan.schedule, plan.budget, every)
        jobs.append(CellJob(plan, config, data, [*extra, *switch], env, options))
    return jobs


def run_on_slurm(
    out: Path, plans: Sequence[Plan], data: Path | None, extra: Sequence[str],
    env: dict[str, str], options: SlurmOptions, detach: bool,
) -> int:  # fmt: skip
    """Submit every cell that is neither finished nor queued / running, record the job ids, then
    wait and print each cell as it ends (``detach``: return after submitting). The exit status: 0
    when every cell has a result, 1 when one failed or was cancelled, 130 / 75 when stopped."""
    total = time.monotonic()
    configs = family_configs(plans[0].family) if plans else {}  # a script family: its script
    waiting: dict[str, Plan] = {}  # job id -> cell
    to_submit: list[Plan] = []
    for i, plan in enumerate(plans, 1):
        head = f"[{i}/{len(plans)}] {plan.run_dir.name}:"
        record = read_cell_record(plan.run_dir)
        job = job_of(record)
        if plan.action == "skip":
            print(f"{head} skipped, already {skip_text(plan)}", flush=True)
            continue
        state = None
        if job is not None:
            state = (queue_answer([job])[0] or {}).get(job)
        if state in LIVE_STATES:
            print(f"{head} {state.lower()} as Slurm job {job}, not resubmitted", flush=True)
            waiting[job] = plan
            continue
        if job is not None:  # ended without a result: cancelled, failed, preempted for good
            ended = ended_state(job) or record.get("slurm", {}).get("state") or "gone"
            record_job_end(plan.run_dir, job, ended)
            why = "cancelled" if ended == "CANCELLED" else f"job {job} {ended.lower()}"
            print(f"{head} {why}; resubmitting ({plan.action})", flush=True)
        to_submit.append(plan)
    if to_submit:
        executor = _executor(out, options, plans[0].family.framework, len(to_submit))
        jobs = cell_jobs(to_submit, configs, data, extra, _env_changes(env), options)
        submitted_at = utc_now()
        began = time.monotonic()
        try:
            with executor.batch():
                handles = [executor.submit(job) for job in jobs]
        except Exception as err:  # sbatch refused: one line, nothing recorded
            said = str(err).strip().splitlines()
            print(f"sweep: error: sbatch refused the jobs: {said[-1] if said else err}",
                  file=sys.stderr)  # fmt: skip
            return 2
        for plan, handle in zip(to_submit, handles):
            _record_job(plan, handle.job_id, submitted_at, options)
            waiting[handle.job_id] = plan
        ids = [h.job_id for h in handles]
        print(f"[sweep] submitted {len(ids)} cell(s) as Slurm job(s) {_ids_text(ids)} in "
              f"{time.monotonic() - began:.1f} s ({show_options(options)}); status: "
              f"budgeted-sweep --status {short(str(out))}", flush=True)  # fmt: skip
    if detach or not waiting:
        if detach and waiting:
            print(f"[sweep] detached: {len(waiting)} job(s) queued or running; rerun the same "
                  "command to collect them and resubmit what is missing", flush=True)  # fmt: skip
        return 0 if detach else _exit_status(plans)
    old = _stop_on_signals()
    try:
        _wait(waiting, plans)
    except _SlurmGone as gone:
        print(f"sweep: error: Slurm has not answered for {_minutes(patience_s())} ({gone}); "
              f"{len(waiting)} job(s) may go on in Slurm ({_ids_text(list(waiting))}); rerun the "
              "same command once it answers to collect them", file=sys.stderr)  # fmt: skip
        return PREEMPTED_EXIT_CODE
    except _Stop as stop:
        print(f"sweep: stopped waiting ({stop}); {len(waiting)} job(s) go on in Slurm "
              f"({_ids_text(list(waiting))}); rerun the same command to collect them",
              file=sys.stderr)  # fmt: skip
        return 130 if str(stop) == "SIGINT" else PREEMPTED_EXIT_CODE
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
    ran = sum(1 for p in plans if p.action != "skip")
    print(
        f"[sweep] {ran} cell(s) on Slurm, {len(plans) - ran} skipped in "
        f"{time.monotonic() - total:.0f} s; table: budgeted-report {short(str(out))}"
    )
    return _exit_status(plans)


def show_options(options: SlurmOptions) -> str:
    parts = [f"partition {options.partition or '(default)'}", f"{options.nodes} node(s)",
             f"{options.gpus_per_node} GPU(s)/node", f"time {options.time_min} min"]  # fmt: skip
    return ", ".join(parts)


def _ids_text(ids: Sequence[str]) -> str:
    if len(ids) > 1 and all("_" in i for i in ids) and len({i.split("_")[0] for i in ids}) == 1:
        return f"{ids[0].split('_')[0]}_[{ids[0].split('_')[1]}-{ids[-1].split('_')[1]}]"
    return " ".join(ids)


def _env_changes(env: dict[str, str]) -> dict[str, str]:
    """What the cells' environment adds to the controller's (the toy set's DETECTRON2_DATASETS):
    sbatch exports the rest."""
    return {k: v for k, v in env.items() if os.environ.get(k) != v}


def _record_job(plan: Plan, job: str, submitted: str, options: SlurmOptions) -> None:
    def change(record: dict[str, Any]) -> dict[str, Any]:
        if not all(record.get(k) == v for k, v in plan.spec.items()):
            record = {**plan.spec, "tries": [], **{k: record[k] for k in ("slurm",) if k in record}}
        history = list(record.get("slurm", {}).get("history", [])) if isinstance(
            record.get("slurm"), dict) else []  # fmt: skip
        old = job_of(record)
        if old is not None:
            history.append({"job_id": old, "state": record["slurm"].get("state")})
        record["slurm"] = {
            "job_id": job, "submitted": submitted, "state": "PENDING",
            "partition": options.partition, "history": history,
        }  # fmt: skip
        return record

    update_cell_record(plan.run_dir, change)


class _SlurmGone(Exception):
    """Slurm has not answered for :func:`patience_s` seconds while the controller waited."""


def patience_s() -> float:
    """How long the controller waits for a Slurm that does not answer before it gives up:
    ``$BUDGETED_SLURM_PATIENCE_S`` seconds, default :data:`SLURM_PATIENCE_S`."""
    text = os.environ.get("BUDGETED_SLURM_PATIENCE_S", "")
    try:
        value = float(text)
    except ValueError:
        return SLURM_PATIENCE_S
    return value if value > 0 and math.isfinite(value) else SLURM_PATIENCE_S


def _wait(waiting: dict[str, Plan], plans: Sequence[Plan]) -> None:
    """Poll the queue until every job in ``waiting`` has ended (missing twice in a row: a requeued
    job is listed again at once), printing each cell as it ends; one line while Slurm does not
    answer (and one when it does again); after :func:`patience_s` of it, :class:`_SlurmGone`."""
    gone_once: set[str] = set()
    index = {p.run_dir.name: i for i, p in enumerate(plans, 1)}
    silent_since: float | None = None
    while waiting:
        states, why = queue_answer(list(waiting))
        if states is None:
            if silent_since is None:
                silent_since = time.monotonic()
                print(f"[sweep] Slurm does not answer ({why}); waiting for it to answer again, up "
                      f"to {_minutes(patience_s())} (the jobs go on meanwhile)",
                      flush=True)  # fmt: skip
            elif time.monotonic() - silent_since > patience_s():
                raise _SlurmGone(why)
            time.sleep(2.0)
            continue
        if silent_since is not None:
            print(f"[sweep] Slurm answers again after {time.monotonic() - silent_since:.0f} s; "
                  f"waiting for {len(waiting)} job(s)", flush=True)  # fmt: skip
            silent_since = None
        for job, plan in list(waiting.items()):
            if job in states:
                gone_once.discard(job)
                continue
            if job not in gone_once:
                gone_once.add(job)
                continue
            del waiting[job]
            _collect(plan, job, f"[{index[plan.run_dir.name]}/{len(plans)}]")
        if waiting:
            time.sleep(1.0)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _collect(plan: Plan, job: str, head: str) -> None:
    """A cell whose job has ended: what its record says it came to, printed in one line."""
    ended = ended_state(job) or "gone"
    record_job_end(plan.run_dir, job, ended)
    record = read_cell_record(plan.run_dir)
    status = record.get("status")
    plan.status = status if status in ("finished", "undecayed", "diverged", "failed") else None
    if ended == "CANCELLED" and status not in ("finished", "undecayed", "diverged"):
        plan.status = "cancelled"
    plan.final = read_final(plan.family, plan.budget, plan.run_dir) if plan.status in (
        "finished", "undecayed") else None  # fmt: skip
    wall = record.get("wall_s") or 0.0
    name = plan.run_dir.name
    if plan.status in ("finished", "undecayed"):
        mark = " (UNDECAYED)" if plan.status == "undecayed" else ""
        shown = metrics_text(record.get("metrics"))
        print(f"{head} {name}: job {job} done in {wall:.1f} s: {shown}{mark}", flush=True)
    elif plan.status == "diverged":
        print(f"{head} {name}: job {job} DIVERGED after {wall:.1f} s", flush=True)
    elif plan.status == "cancelled":
        print(f"{head} {name}: job {job} CANCELLED; rerun the same command to resume it",
              flush=True)  # fmt: skip
    else:
        log = plan.run_dir / "sweep.log"
        print(f"{head} {name}: job {job} FAILED ({ended}, status {status}); log: {short(str(log))}"
              "; rerun the same command to retry it", flush=True)  # fmt: skip


def _exit_status(plans: Sequence[Plan]) -> int:
    bad = [p.run_dir.name for p in plans if p.action != "skip" and p.status in (
        None, "failed", "cancelled", "interrupted")]  # fmt: skip
    if bad:
        print(
            f"sweep: error: {len(bad)} cell(s) have no result: {', '.join(bad)}; rerun the same "
            "command to resume them (budgeted-sweep --status shows why)",
            file=sys.stderr,
        )
        return 1
    return ended_status(plans)
