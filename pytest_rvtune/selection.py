"""Selecting configs: `-k KEY=VALUE` rewriting, the keywords every item carries for its config values, and the
messages for --rvtune-config filters that select nothing. Knows nothing of pytest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# pytest's -k grammar has no '=': a user's `-k "BLOCK_SIZE_M=16"` is rewritten to the keyword
# `:BLOCK_SIZE_M:16:`, which every item carries for each of its config values. -k matches substrings; the
# colons around make it exact (BLOCK_SIZE_M=16 must not select BLOCK_SIZE_M=160 or XBLOCK_SIZE_M=16).
# A value may hold a '-' before a digit (EPS=1e-05, OFFSET=-1); a '-' before a letter joins the next part of an id.
KEY_EQ_VALUE = re.compile(r"\b([A-Za-z_]\w*)=(-?[\w.]+(?:-(?=\d)[\w.]+)*)")
#: A pasted item name, ``matmul[small-BLOCK_SIZE_M=16-BLOCK_SIZE_N=32]``: the kernel, then its parameters; a node
#: id's ``path::`` before it, and `` on qemu`` after it as the report and compare name an item, are taken too.
PASTED_NAME = re.compile(r"(?:[\w./-]+::)*\b(\w+)\[([^\]\s()]*=[^\]\s()]*)\](?:\s+on\s+([\w.-]+))?")
#: The ``-`` joining the parts of a pasted config id (``small-BLOCK_SIZE_M=16-BLOCK_SIZE_N=32``, and the target or
#: harness suffix of ``...-BLOCK_SIZE_N=32-generic-qemu``): before a part that starts with a letter.
ID_JOIN = re.compile(r"(?<=[\w.])-(?=[A-Za-z_])")


def rewrite_keyword(keyword: str) -> str:
    """A -k expression with every ``KEY=VALUE`` turned into the item keyword ``:KEY:VALUE:``; a pasted config id
    (``BLOCK_SIZE_M=16-BLOCK_SIZE_N=32``, as `pytest --collect-only -q` and the ranking print it) or item name
    (``matmul[small-BLOCK_SIZE_M=16-...]``) becomes its parts joined with ``and``."""
    if "=" not in keyword:
        return keyword
    keyword = PASTED_NAME.sub(lambda m: "(" + " and ".join(p for p in m.groups() if p) + ")", keyword)
    keyword = ID_JOIN.sub(" and ", keyword)
    return KEY_EQ_VALUE.sub(r":\1:\2:", keyword)


def keyword_hint(keyword: str, rewritten: str) -> str:
    """What to say when a -k with KEY=VALUE selected no kernel item."""
    return (f"rvtune: -k {keyword!r} (read as {rewritten!r}) selected no kernel item. Config values are matched as "
            "KEY=VALUE terms (exact values), joined by and/or/not with kernel and case names, e.g. "
            "-k 'matmul and small and BLOCK_SIZE_M=16'; a pasted config id or item name is split into such terms. "
            "`pytest --collect-only -q` lists the items")


def pasted_item_hint(keyword: str, rewritten: str, items: Sequence[tuple[str, str, str]]) -> str | None:
    """When a -k pasted from an item id (``kernel[case-config]``, its node id, ``... on TARGET``, or a config id)
    selected nothing: the items (node id, name, target) it names, and how to run them; None when it names none."""
    text = keyword.strip().strip("'\"")
    target = ""
    on = re.fullmatch(r"(.*\])\s+on\s+([\w.-]+)", text)
    if on:
        text, target = on[1], on[2]
    text = text.rsplit("::", 1)[-1]
    if not re.fullmatch(r"\w+\[[^\]\s]+\]|[^\s\[\]()]+=[^\s\[\]()]+", text):
        return None  # an expression, not a pasted id
    if "[" in text:
        stem = text[:-1]
        named = [i for i in items if i[1] == text or i[1].startswith(stem + "-")]
    else:
        named = [i for i in items if f"[{text}-" in i[1] or f"-{text}-" in i[1] or i[1].endswith(f"-{text}]")
                 or f"[{text}]" in i[1]]
    named = [i for i in named if not target or i[2] == target]
    if not named:
        return None
    shown = " ".join(f"'{nodeid}'" for nodeid, _, _ in named[:3]) + (" ..." if len(named) > 3 else "")
    return (f"rvtune: -k {keyword!r} (read as {rewritten!r}) selected nothing, but it names {len(named)} item"
            f"{'' if len(named) == 1 else 's'}: give the node id{'' if len(named) == 1 else 's'} instead of -k: "
            f"pytest {shown}")


def config_keywords(config: Mapping[str, Any]) -> set[str]:
    """The keywords an item carries for its config values (what a rewritten -k matches)."""
    return {f":{key}:{value}:" for key, value in config.items()}


def filter_keys(config_filter: str) -> set[str]:
    """The keys a --rvtune-config filter names (its syntax was checked at configure)."""
    return {clause.partition("=")[0].strip() for clause in config_filter.split(";") if clause.strip()}


def value_order(value: str) -> tuple[bool, int, str]:
    """Config values as typed (filter_key_values), merged over kernels: ints in numeric order, then the rest."""
    is_int = value.lstrip("-").isdigit()
    return (not is_int, int(value) if is_int else 0, value)


def filter_errors(filter_keys_unknown: Mapping[str, int], kernel_modules: int,
                  filter_values: Mapping[str, Mapping[str, set[str]]], filters_matched: set[str]) -> list[str]:
    """One message per --rvtune-config mistake seen over the whole collection: a key no kernel has, or a filter
    that matched no config of any kernel (with the values that exist)."""
    messages = []
    nowhere = sorted(k for k, n in filter_keys_unknown.items() if n == kernel_modules > 0)
    if nowhere:
        messages.append(f"--rvtune-config: no kernel has the key(s) {', '.join(nowhere)}; check the spelling "
                        "against the config ids in `pytest --collect-only -q`")
    for config_filter, values in filter_values.items():
        if config_filter in filters_matched or not values:  # no values: its key is unknown (above)
            continue
        existing = "; ".join(f"{key}: {', '.join(sorted(vs, key=value_order))}" for key, vs in values.items())
        messages.append(f"--rvtune-config {config_filter}: no config of any kernel matches it; the values that "
                        f"exist are {existing}")
    return messages


def case_notes(asked: Sequence[str], found: set[str], left_out: Sequence[tuple[str, str, str, list[str], list[str]]],
               default: bool = False) -> tuple[list[tuple[str, str]], list[str]]:
    """--rvtune-case over modules with different case sets: (notes, errors). A note per module that lacks an
    asked case (node id, text: it is left out of that case); an error per asked case no module has. ``default``:
    nothing was asked, the cases are the targets' defaults (the texts say so and how to choose one)."""
    notes = [(nodeid, f"kernel {kernel} has no case {', '.join(lacking)} (its cases: {', '.join(cases)}): left out "
                      f"of {'it' if len(lacking) == 1 else 'them'}"
                      + (f"; run it with --rvtune-case {cases[0]}" if default and cases else ""))
             for nodeid, _, kernel, lacking, cases in left_out]
    nowhere = [c for c in asked if c not in found]
    known = ", ".join(sorted({c for *_, cases in left_out for c in cases} | found))
    them = "it" if len(nowhere) == 1 else "them"
    if default:  # an error only when nothing runs at all (a Triton_RVV project's entries run all their cases)
        return notes, ([f"the target's default case {', '.join(nowhere)}: no kernel has {them}; choose one with "
                        f"--rvtune-case: the cases that exist are {known}"] if left_out and not found else [])
    if nowhere and (found or left_out):
        return notes, [f"--rvtune-case {', '.join(nowhere)}: no kernel has {them}; the cases that exist are {known}"]
    return notes, []
