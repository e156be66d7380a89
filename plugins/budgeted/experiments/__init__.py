"""Experiments: the config families, sweeps, reports, statistics, ranking, branching, gradient
norms."""
