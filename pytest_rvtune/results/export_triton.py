"""Tuned configs as Python that Triton loads: `rvtune export-best --format triton` (a module of ``triton.Config``
lists for ``@triton.autotune(configs=...)``) and ``--format triton-rvv`` (the same with a getter in Triton_RVV's
style, ``get_<kernel>_kernel_autotune_config()``, which their benchmark scripts call).

The module imports only triton. A config's values are the kernel's constexpr keyword arguments as the run
recorded them; ``num_warps``, ``num_stages`` and ``num_threads`` (Triton_RVV's launcher threads), when a config
has them, go to ``triton.Config``'s own arguments (``num_threads`` is accepted by Triton_RVV's Triton and by
pytest-rvtune's CPU driver)."""

from __future__ import annotations

from typing import Any

from pytest_rvtune.results.export import tunings
from pytest_rvtune.results.records import group_label

#: Config keys that are ``triton.Config`` arguments, not kernel keyword arguments.
CONFIG_ARGUMENTS = ("num_warps", "num_stages", "num_threads")
FORMATS = ("triton", "triton-rvv")


def config_expr(config: dict[str, Any]) -> str:
    kwargs = {k: v for k, v in config.items() if k not in CONFIG_ARGUMENTS}
    extra = "".join(f", {k}={config[k]!r}" for k in CONFIG_ARGUMENTS if k in config)
    return f"triton.Config({kwargs!r}{extra})"


def module_text(doc: dict[str, Any], fmt: str) -> str:
    """The Python module of one kernel's tuning document (export.export_kernel's)."""
    kernel = doc["kernel"]
    ordered: dict[str, dict[str, Any]] = {}  # config id -> config: defaults first, then each case's winner
    by_case: dict[str, dict[str, Any]] = {}
    by_problem: dict[str, list[str]] = {}
    for problem_id, tuning in tunings(doc).items():
        ids = [tuning["default"]["config_id"], *(e["config_id"] for e in tuning["cases"].values())]
        ordered.setdefault(tuning["default"]["config_id"], tuning["default"]["config"])
        for case, entry in tuning["cases"].items():
            ordered.setdefault(entry["config_id"], entry["config"])
            by_case[group_label(case, problem_id)] = entry["config"]
        by_problem[problem_id] = list(dict.fromkeys(ids))
    lines = [f'"""Tuned configs of {kernel} on {doc["target"]} (ranked by {", ".join(doc["ranked_by"])}), written by',
             f'`rvtune export-best {doc["source"]} --format {fmt}`.',
             "",
             "CONFIGS: each distinct winner, the most common first: @triton.autotune(configs=CONFIGS, key=[...]).",
             'CONFIG_BY_CASE: the winner of each case ("emu", or "emu IS_CAUSAL=True" with problem keys).',
             '"""', "", "import triton", "",
             "CONFIGS = [", *(f"    {config_expr(c)},  # {cid}" for cid, c in ordered.items()), "]", "",
             "CONFIG_BY_CASE = {", *(f"    {case!r}: {config_expr(c)}," for case, c in by_case.items()), "}"]
    if doc.get("problem_keys"):
        lines += ["", "#: per problem (its PROBLEM_KEYS values): that problem's winners, its most common first",
                  "CONFIGS_BY_PROBLEM = {",
                  *(f"    {pid!r}: [{', '.join(config_expr(ordered[i]) for i in ids)}]," for pid, ids in
                    by_problem.items()), "}"]
    if fmt == "triton-rvv":
        lines += ["", "", f"def get_{kernel}_kernel_autotune_config():",
                  '    """The tuned configs, in the getter form a Triton_RVV benchmark script calls."""',
                  "    return list(CONFIGS)"]
    return "\n".join(lines) + "\n"
