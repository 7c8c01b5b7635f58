"""Public benchmarks run as fxtr agent evals: ``fxtr.benchmarks.tau2`` (τ²-bench)."""
