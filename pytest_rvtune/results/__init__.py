"""Results: records, the results file, runs, comparisons, reports and plots (library code, no CLI)."""
