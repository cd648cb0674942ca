"""pytest glue for pytest-rvtune: options, collection of kernel modules, fixtures. Thin by design."""
