/* rvtune_kernel_prelude.h: the runtime headers every generated kernel C includes first, in this order (lower.py
   emits exactly these lines). Never included by a kernel: compiled once into a precompiled header
   (compiler/pch.py) that clang loads instead of parsing them again for every config. */
#include "rvtune_rt.h"
#include "rvtune_dot.h"
