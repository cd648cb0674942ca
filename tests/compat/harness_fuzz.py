"""A seeded generator of harness texts from the constructs real Triton_RVV harnesses use (our own text): for the
fuzz tests of the harness reader and of `rvtune import`."""

from __future__ import annotations

import random
import string

PIECES = [
    'std::to_string({v})', '"x"', '"{{"', '"}}"', "std::to_string({v} * {v})", "std::to_string(({v} + 1) / 2)",
    "std::to_string(helper({v}))", "SHAPE_OF({v})", "std::to_string({n})", "std::to_string(-{n})", "{v}",
    "std::to_string((size_t){v})", "std::to_string(static_cast<int>({v}))", "std::to_string({v} % 0)",
    "std::to_string({v} / 0)", "std::string(\"a\")", "std::to_string(1.5f)", '"\\"q\\""', "std::to_string(0x1F)",
    "std::to_string(09)", "std::to_string(", ")", "std::to_string(((((({v})))))", "std::to_string(moe_kernel_BLOCK)",
]
LINES = [
    "int {v} = {n};", "int {v} = {n}, {v} = {v} * {n};", "{v} = {v} + 1;", "#define {V} {n}", "#define {V}(a) a",
    "float {v} = {n}.0f;", "double {v} = 1.0 / {n};", "int64_t {v} = {v};", "std::string {v} = {expr};",
    "auto f = getDB(\"k\", {expr}, {n});", "auto f = getDB({expr}, {n});", "auto f = getDB(\"k\", {expr}, {v});",
    "getDB(", "moe_kernel_wrap(1, 1, 1, 1, moe_kernel, {v}, {expr}, 1.0f);", "{v} = Shape.at({n});",
    "assert(Shape.size() == {n});", "/* {expr}", "*/", "// {expr}", "#if 0", "#endif", "#else", "{{", "}}", "\"",
    "for (int i = 0; i < {v}; i++) {{", "int {v}[{n}];", "{v}++;", "const std::string {V} = \"Triton\";",
]


def random_harness(rng: random.Random) -> str:
    """A harness of random lines made of the constructs above (sometimes cut and followed by noise)."""
    names = ["M", "N", "K", "TopK", "tmp", "padded", "x", "argc"]

    def fill(template: str, depth: int = 0) -> str:
        expr = " + ".join(fill(rng.choice(PIECES), depth + 1) for _ in range(rng.randint(1, 4))) if depth < 3 \
            else '"e"'
        return template.format(v=rng.choice(names), V=rng.choice(["SHAPE", "N_E", "M"]),
                               n=rng.choice([0, 1, 2, 7, 2008, 10**30]), expr=expr)

    lines = [fill(rng.choice(LINES)) for _ in range(rng.randint(1, 30))]
    if rng.random() < 0.2:  # raw noise: cut anywhere, odd bytes
        text = "\n".join(lines)
        cut = rng.randint(0, len(text))
        lines = [text[:cut] + "".join(rng.choice(string.printable + "\x00{}()\"'\\") for _ in range(20))]
    return "int main(int argc, char *argv[]) {\n" + "\n".join(lines) + "\n}\n"
