"""The ``--policy recommended`` experiment: the real-run split, the candidates, the rule (PROTOCOL.md),
the runs and their tables (RESULTS.md)."""
