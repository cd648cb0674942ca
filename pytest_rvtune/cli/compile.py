r"""``rvtune compile``: one kernel config through the compiler, printing the stage a kernel author asks for.

    rvtune compile kernels/matmul.py --config BLOCK_SIZE_M=32,BLOCK_SIZE_N=32,BLOCK_SIZE_K=32,GROUP_SIZE_M=8 \
        --target qemu --emit c

``--emit ttir|c|asm`` prints that stage (asm: llvm-objdump of the kernel object); ``--emit elf`` links the kernel
with the launcher and the harness (build.py) and prints the ELF's path. The signature comes from the kernel
module's ``launch()`` for ``--case`` (spec.py), or from ``--signature a_ptr=*fp32,M=i32,...``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain, qemu_command

EMITS = ("ttir", "c", "asm", "elf")


class CompileCommandError(Exception):
    """Bad input: the message names the file / kernel / config and says what to do."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compile", help="compile one kernel config and print a stage (TTIR, C, assembly) or build its ELF",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernel_file", type=Path, metavar="KERNEL_FILE", help="a kernels/<name>.py module")
    p.add_argument("--config", default=None, metavar="K=V,...",
                   help="constexpr values, e.g. BLOCK_SIZE_M=32,BLOCK_SIZE_N=32 (ints, True/False); "
                        "default: the module's first autotune config")
    p.add_argument("--target", default="qemu",
                   help="qemu (default) or a board: rv64gcv_zvl256b code; host: native code")
    p.add_argument("--emit", action="append", choices=EMITS, metavar="STAGE",
                   help=f"what to print, one of {', '.join(EMITS)} (repeatable; default: c)")
    p.add_argument("--case", default=None, help="the problem case whose launch gives the signature "
                                                "(default: 'small' if the module has it, else its first)")
    p.add_argument("--signature", default=None, metavar="NAME=TYPE,...",
                   help="types of the non-constexpr parameters (e.g. a_ptr=*fp32,M=i32) instead of the "
                        "module's launch()")
    p.set_defaults(func=run)


def parse_assignments(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise CompileCommandError(f"{what} {text!r}: {item!r} is not NAME=VALUE")
        if key.strip() in out:
            raise CompileCommandError(f"{what} {text!r}: {key.strip()} is given twice")
        out[key.strip()] = value.strip()
    return out


def parse_config(text: str) -> dict[str, int | bool]:
    config: dict[str, int | bool] = {}
    for key, value in parse_assignments(text, "--config").items():
        if value in ("True", "true", "False", "false"):
            config[key] = value in ("True", "true")
            continue
        try:
            config[key] = int(value, 0)
        except ValueError:
            raise CompileCommandError(
                f"--config: {key}={value} is not an integer or True/False (block constants are ints)") from None
    return config


def isa_of_target(name: str) -> str:
    """The ISA code for a target is built for: host -> host; qemu and boards -> rv64gcv (board config)."""
    if name == "host":
        return HOST_ISA
    if name == "qemu":
        return RISCV_ISA
    from pytest_rvtune.targets.config import load_targets

    targets = load_targets(Path.cwd())
    if name not in targets:
        raise CompileCommandError(f"--target {name}: no such target; known: {', '.join(sorted(targets))} "
                                  "(boards come from rvtune.toml or [tool.rvtune.targets] in pyproject.toml)")
    return targets[name].isa


def _check_config(spec: Any, config: dict[str, Any]) -> None:
    unknown = [k for k in config if k not in spec.constexpr_names]
    if unknown:
        raise CompileCommandError(
            f"{spec.path}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a constexpr of "
            f"{spec.kernel_name} (its constexprs: {', '.join(spec.constexpr_names)})")


def complete_config(spec: Any, given: dict[str, Any]) -> dict[str, Any]:
    """A partial --config picks the first config of the kernel's space that agrees with it (matmul's
    GROUP_SIZE_M need not be spelled out); one outside the space is taken as given."""
    matching = (dict(c) for c in spec.configs if all(dict(c).get(k) == v for k, v in given.items()))
    chosen = next(matching, given)
    space_keys = {key for config in spec.configs for key in config}
    missing = sorted(space_keys - chosen.keys())
    if missing:
        raise CompileCommandError(
            f"{spec.path}: no config of {spec.kernel_name}'s space has "
            f"{', '.join(f'{k}={v}' for k, v in given.items())}; give every block constant to build a config "
            f"outside the space (missing: {', '.join(missing)})")
    return chosen


def _signature_and_constexprs(spec: Any, config: dict[str, Any], case: str,
                              signature: str | None) -> tuple[dict[str, str], dict[str, Any]]:
    if signature is None:
        launch = spec.capture_launch(case, config)
        sig = {k: v for k, v in launch.signature.items() if v != "constexpr"}
        return sig, dict(launch.constexprs)
    sig = parse_assignments(signature, "--signature")
    unknown = [k for k in sig if k not in spec.param_names]
    if unknown:
        raise CompileCommandError(f"--signature: {spec.kernel_name} has no parameter {', '.join(unknown)} "
                                  f"(parameters: {', '.join(spec.param_names)})")
    missing = [n for n in spec.param_names if n not in sig and n not in config]
    if missing:
        raise CompileCommandError(
            f"{spec.path}: {spec.kernel_name} parameter(s) {', '.join(missing)} have no type and no value: "
            "add constexprs to --config and other parameters to --signature (e.g. a_ptr=*fp32,M=i32)")
    return sig, config


def compile_main(args: argparse.Namespace, out: Any = None) -> int:
    from pytest_rvtune.build import code_symbols
    from pytest_rvtune.compiler.api import compile_kernel
    from pytest_rvtune.spec import load_kernel_module

    spec = load_kernel_module(args.kernel_file)
    config = parse_config(args.config) if args.config is not None else dict(spec.configs[0])
    _check_config(spec, config)
    config = complete_config(spec, config)
    case = args.case or ("small" if "small" in spec.cases else next(iter(spec.cases)))
    if case not in spec.cases:
        raise CompileCommandError(f"{spec.path}: no case {case!r}; cases: {', '.join(spec.cases)}")
    isa = isa_of_target(args.target)
    signature, constexprs = _signature_and_constexprs(spec, config, case, args.signature)
    emits = args.emit or ["c"]
    out = out or sys.stdout
    ck = compile_kernel(spec.kernel, signature, constexprs, isa)
    for emit in emits:
        if len(emits) > 1:
            print(f"// ---- {emit}: {ck.name} [{spec.config_id(config)}] for {isa}", file=out)
        if emit == "ttir":
            print(ck.ttir, file=out)
        elif emit == "c":
            print(ck.c_source, file=out)
        elif emit == "asm":
            print(Toolchain.for_isa(isa).disassemble(ck.kernel_obj), file=out)
            if ck.runtime_obj is not None:
                print(f"# The GEMM panels ({', '.join(code_symbols(ck.runtime_obj))}) the kernel calls are compiled "
                      f"once per toolchain into {ck.runtime_obj}: read them there with llvm-objdump-19 -d, or in the "
                      f"linked ELF's .s (the rvtune_build fixture's asm)", file=out)
        elif emit == "elf":
            print(_build_elf(spec, case, config, isa), file=out)
    return 0


def _build_elf(spec: Any, case: str, config: dict[str, Any], isa: str) -> Path:
    try:
        from pytest_rvtune.build import build_item
    except ImportError as e:
        raise CompileCommandError(
            f"--emit elf needs the ELF builder (pytest_rvtune/build.py), which is not available: {e}; "
            "use --emit ttir, c or asm") from e
    art = build_item(spec, case, config, isa)
    runner = "" if isa == HOST_ISA else " ".join(qemu_command()) + " "  # a board runs the ELF itself
    print(f"rvtune compile: {art.harness_kind} harness; run it here as: {runner}ELF [--runs N] "
          + " ".join(map(str, art.argv)), file=sys.stderr)
    return art.elf


def run(args: argparse.Namespace) -> int:
    from pytest_rvtune.build import BuildError
    from pytest_rvtune.compiler.api import CompileError
    from pytest_rvtune.spec import KernelModuleError

    try:
        return compile_main(args)
    except (CompileCommandError, KernelModuleError) as e:
        print(f"rvtune compile: error: {e}", file=sys.stderr)
        return 2
    except (CompileError, BuildError) as e:
        print(f"rvtune compile: error: {e}", file=sys.stderr)
        return 1
