"""The rvtune Triton backend: Triton IR -> C -> RISC-V (rv64gcv) or host objects."""
