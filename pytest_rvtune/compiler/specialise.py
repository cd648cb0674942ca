"""Which runtime arguments Triton's JIT turns into constants: integers equal to 1.

Upstream Triton (and triton-cpu, whose launcher the Triton_RVV harnesses call) specialises every integer
argument whose value is 1 at launch time into the constant 1, so the kernel and its ``<name>_wrap`` lose that
parameter: a matmul on contiguous tensors has ``stride_ak``, ``stride_bn`` and ``stride_cn`` dropped, and
their harness passes 9 runtime arguments for 12. Building such a kernel here means passing these values as
constexprs to ``compile_kernel``; this module says which they are. Bools are not specialised (Triton keeps
them as ``i1`` arguments), nor are floats.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping


def specialise_ones(values: Mapping[str, int | float | bool], constexpr_names: Collection[str] = (),
                    do_not_specialise: Collection[str] = ()) -> dict[str, int]:
    """The arguments of ``values`` (name -> launch value) that Triton specialises: ints (not bools) equal to 1,
    not already constexprs and not in the kernel's ``do_not_specialize`` list. Pass the result as extra
    constexprs to ``compile_kernel``."""
    skip = {*constexpr_names, *do_not_specialise}
    return {name: 1 for name, value in values.items()
            if name not in skip and isinstance(value, int) and not isinstance(value, bool) and value == 1}
