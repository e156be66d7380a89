"""Run safety: untrusted files loaded safely, atomic writes, preemption, folder locks, what ranks
agree on."""
