"""Compatibility with triton-cpu / Triton_RVV projects."""
