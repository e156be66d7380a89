"""Run control, framework-neutral: what a budgeted run decides, decided once for every framework.

Below the adapters and above :mod:`budgeted.schedules`, :mod:`budgeted.safety` and
:mod:`budgeted.runs`: it imports those and torch, never Detectron2, MMEngine, an adapter or the
experiments (tests/test_layout.py). An adapter says only where its framework keeps things, through
its accessor (:class:`~budgeted.control.access.Access`: the module ``budgeted.runs.<framework>``)
and a hook shim, and words every refusal its own way. The modules, each imported by name (this
package imports none of them, nor torch):

- :mod:`~budgeted.control.access`: what an accessor provides, and the records it answers in (a
  checkpoint's position, its saved base LRs, the refusals' words);
- :mod:`~budgeted.control.grad_norm`: the full-gradient norm over a fixed subset of batches;

and, as the adapters hand them over (issue 54):

- ``engine``: the budget scheduler's one plan over iterations or seconds, its state and its
  resume decision;
- ``plan``: budget to loop length, the ``Budget<Label>`` names, the user's own schedule;
- ``resume``: which file to resume, its position, a finished run, its base LRs and budget;
- ``stops``: preemption, divergence, the deadline, an undecayed end, checkpoints at N;
- ``folder``: the output folder writable, not another run's, not in use, claimed;
- ``preflight`` and ``tool``: a tool's checks in its own order, and its life up to the exit status.

Example:
    >>> from budgeted.control.access import Words
    >>> Words({"in_use": "{key} {folder} is in use"}).line("in_use", key="OUTPUT_DIR", folder="o")
    'OUTPUT_DIR o is in use'
"""
