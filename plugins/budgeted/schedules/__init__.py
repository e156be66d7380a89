"""The schedule math: what a budget is, the schedules, budget units and time budgets (no torch, no
framework)."""
