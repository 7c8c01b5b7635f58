"""The example evals' data is not collected: `data/calc_repo` is the repository the sandbox
eval's agent fixes, with a failing unittest of its own (its test runs inside the sandbox)."""

collect_ignore_glob = ["data/*"]
