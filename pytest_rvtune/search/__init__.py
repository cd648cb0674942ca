"""Searching a config space too big to run whole: a strategy chooses which (config, case) to evaluate next from
the results so far, within a budget of evaluations (space.py, strategies.py, engine.py, report.py). Knows nothing
of pytest: the plugin (search_loop.py) and `rvtune tune` (cli/tune.py, evaluation in kernel_eval.py) drive it."""
