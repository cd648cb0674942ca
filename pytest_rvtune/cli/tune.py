"""`rvtune tune KERNEL --strategy S --budget N`: search a kernel's configs over its cases without pytest, with the
engine of `pytest --rvtune-search`: each config it chooses is built, run and recorded as a pytest item would be (a
results file `rvtune report` reads), and it ends with each case's best and its gap to a reference run's best."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.cli.rank_by import add_rank_by_argument

DEFAULT_TARGET = "qemu"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from pytest_rvtune.search.strategies import STRATEGIES
    p = subparsers.add_parser("tune", help="search a kernel's configs within a budget (random, halving, tpe)",
                              description=__doc__)
    p.add_argument("kernel", metavar="KERNEL", help="a kernel module: its path, or its name in ./kernels")
    p.add_argument("--strategy", required=True, choices=list(STRATEGIES),
                   help="random sampling, successive halving across the cases (cheapest first), or Optuna's TPE")
    p.add_argument("--budget", required=True, type=int, metavar="N",
                   help="(config, case) evaluations to spend over all cases")
    p.add_argument("--case", action="append", default=[], metavar="C",
                   help="a case of the kernel's CASES (repeatable; default: the target's default case)")
    p.add_argument("--config", action="append", default=[], metavar="FILTER",
                   help="search only the configs matching e.g. 'BLOCK_SIZE_M=16,32;BLOCK_SIZE_N=64' (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the strategy's random draws (default 0)")
    p.add_argument("--target", default=DEFAULT_TARGET, metavar="NAME",
                   help="where items run: qemu (default), host or a configured board")
    p.add_argument("--results", type=Path, default=None, metavar="PATH",
                   help="results file to append to (default .rvtune/results/<run id>.jsonl)")
    p.add_argument("--reference", default=None, metavar="RUN",
                   help="an earlier run of the same space (an exhaustive one): the search's best is measured "
                        "against its best")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="kill one ELF run after S seconds")
    p.add_argument("--golden-dir", type=Path, default=None, metavar="DIR",
                   help="committed golden data (default: golden/ beside the kernel's directory)")
    add_rank_by_argument(p, "search by")
    p.set_defaults(func=run_tune)


def kernel_path(text: str) -> Path | None:
    path = Path(text)
    if path.suffix == ".py" or path.is_file():
        return path if path.is_file() else None
    candidate = Path("kernels") / f"{text}.py"
    return candidate if candidate.is_file() else None


def run_tune(args: argparse.Namespace) -> int:
    def fail(message: str) -> int:
        print(f"rvtune tune: {message}", file=sys.stderr)
        return 2

    if args.budget < 1:
        return fail(f"--budget {args.budget}: evaluations to spend, at least 1")
    path = kernel_path(args.kernel)
    if path is None:
        return fail(f"{args.kernel}: no such kernel module (give its path, or the name of one in ./kernels)")
    from pytest_rvtune.search.strategies import import_optuna, make_strategy
    if args.strategy == "tpe":  # Optuna is an extra: its absence is said before anything is built
        try:
            import_optuna()
        except ImportError as exc:
            return fail(str(exc))
    from pytest_rvtune.results.records import RunFileError
    from pytest_rvtune.results.run_names import resolve
    from pytest_rvtune.results.runs import load_run
    from pytest_rvtune.results.writer import ResultsWriter, new_run_id, unwritable_reason
    from pytest_rvtune.run_options import default_run_options
    from pytest_rvtune.search.engine import run_search
    from pytest_rvtune.search.kernel_eval import KernelEvaluator
    from pytest_rvtune.search.report import (
        record_value,
        search_summary,
        summary_lines,
        summary_path,
        write_summaries,
    )
    from pytest_rvtune.search.space import SearchSpace, Trial, by_size
    from pytest_rvtune.spec import KernelModuleError, filter_configs, load_kernel_module
    from pytest_rvtune.targets.config import ConfigError, load_targets
    from pytest_rvtune.targets.factory import make_target

    rootdir = paths.project_root()
    try:
        spec = load_kernel_module(path)
    except KernelModuleError as exc:
        return fail(str(exc))
    except Exception as exc:  # the module's own import error
        return fail(f"kernel module {path}: {type(exc).__name__}: {exc}")
    configs = list(spec.configs)
    for config_filter in args.config:
        try:
            configs = filter_configs(configs, config_filter)
        except ValueError as exc:
            return fail(f"--config: {exc}")
    if not configs:
        return fail(f"--config {' '.join(args.config)}: no config of {spec.name} matches")
    try:
        target_configs = load_targets(rootdir)
    except ConfigError as exc:
        return fail(f"target configuration: {exc}")
    if args.target not in target_configs:
        return fail(f"--target {args.target}: unknown target; known targets are {', '.join(sorted(target_configs))}")
    target_config = target_configs[args.target]
    emulated = target_config.timing_source == "emulated"
    cases = args.case or [target_config.default_case or ("emu" if emulated else "bench")]
    missing = [c for c in cases if c not in spec.cases]
    if missing:
        return fail(f"kernel {spec.name} has no case {', '.join(missing)}; its cases: {', '.join(spec.cases)}")
    problems = {spec.config_id(spec.problem_of(c)) for c in configs}
    if len(problems) > 1:
        return fail(f"kernel {spec.name} has problem keys ({', '.join(sorted(problems))}): search one problem at a "
                    f"time with --config, e.g. --config '{next(iter(sorted(problems))).replace('-', ';')}'")
    reference = None
    if args.reference:
        try:
            reference = load_run(resolve(args.reference, directory=paths.results_dir(rootdir)))
        except RunFileError as exc:
            return fail(f"--reference: {exc}")
    run_id = new_run_id()
    results = args.results or paths.results_dir(rootdir) / f"{run_id}.jsonl"
    problem = unwritable_reason(results)
    if problem is not None:
        return fail(f"--results {results}: {problem}")
    try:
        target = make_target(target_config, worker_id="main")
    except Exception as exc:
        return fail(f"target {args.target} is unavailable: {exc}")
    ids = [spec.config_id(c) for c in configs]
    space = SearchSpace([dict(c.kwargs) for c in configs], ids, by_size(cases, spec.cases))
    defaults = default_run_options(emulated)
    options = defaults if args.timeout is None else dataclasses.replace(defaults, timeout=args.timeout)
    golden_root = args.golden_dir or spec.path.parent.parent / "golden"
    evaluator = KernelEvaluator(spec, target, golden_root.resolve(), options, ResultsWriter(results), run_id,
                                rootdir, {"strategy": args.strategy, "seed": args.seed, "budget": args.budget})
    strategy = make_strategy(args.strategy, space, args.budget, args.seed)
    records = []
    best: dict[str, float] = {}

    def evaluate(trial: Trial, step: int) -> float | None:
        record = evaluator.evaluate(configs[trial.config], trial.case, step)
        records.append(record)
        value = record_value(record, args.rank_by)
        if value is not None:
            best[trial.case] = min(best.get(trial.case, value), value)
        shown = record["outcome"] if value is None else f"{value:,.0f}"
        print(f"[{step + 1}/{args.budget}] {trial.case} {ids[trial.config]}: {shown} "
              f"(best {best.get(trial.case, float('nan')):,.0f})", flush=True)
        return value

    try:
        outcome = run_search(space, strategy, args.budget, evaluate)
    except KeyboardInterrupt:
        print(f"rvtune tune: interrupted; the {len(records)} evaluated configs are in {results}", file=sys.stderr)
        return 130
    finally:
        target.close()
    found = search_summary(outcome, records, kernel=spec.name, target=args.target, problem_id=next(iter(problems)),
                           rank_by=args.rank_by, reference=reference)
    for line in summary_lines(found):
        print(line)
    write_summaries(summary_path(results), [found])
    print(f"results: {results} (rvtune report {results}); summary: {summary_path(results)}")
    return 0
