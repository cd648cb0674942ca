"""Binary images of golden TXT files (harness/data_image.py): the harness reads an image into exactly the bits
it parses from the text, for every dtype, on rv64 under QEMU and on the host; a file with anything unusual
keeps its text, so the harness's own file:line errors still name it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_rvtune.harness import HEADER_DIR
from pytest_rvtune.harness.data_image import KIND_FLOAT, KIND_INT, data_image, image_values
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, qemu_command

# Reads argv[1] as each dtype named in argv[2..] and prints every element's raw bytes in hex, then the path
# the tensor names in messages.
DUMP_C = r"""
#include "rvtune_harness.h"
#include <string.h>
int main(int argc, char **argv) {
    static const char *names[] = {"f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8"};
    for (int a = 2; a < argc; a++) {
        rvtune_dtype dt = RVTUNE_F32;
        for (int k = 0; k < 9; k++) if (strcmp(argv[a], names[k]) == 0) dt = (rvtune_dtype)k;
        rvtune_tensor t;
        rvtune_read_txt(&t, "t", argv[1], dt);
        printf("%s %lldx%lld %s:", argv[a], (long long)t.rows, (long long)t.cols, t.path);
        const unsigned char *p = (const unsigned char *)t.data;
        for (size_t i = 0; i < rvtune_nbytes(&t); i++) printf("%02x", p[i]);
        printf("\n");
    }
    return 0;
}
"""

FLOAT_DTYPES = ["f32", "f64", "f16", "bf16"]
INT_DTYPES = ["i8", "i16", "i32", "i64", "u8"]


@pytest.fixture(scope="module", params=[RISCV_ISA, "host"])
def dump(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp(f"dump_{request.param}")
    tc = Toolchain.for_isa(request.param)
    (d / "dump.c").write_text(DUMP_C)
    tc.compile(d / "dump.c", d / "dump.o", ("-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}"))
    tc.link([d / "dump.o"], d / "dump")
    return [*(qemu_command() if request.param == RISCV_ISA else []), str(d / "dump")]


def _read(dump: list[str], path: Path, dtypes: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*dump, str(path), *dtypes], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_float_image_reads_the_same_bits_as_the_text_for_every_float_dtype(dump, tmp_path, isolated_cache):
    rng = np.random.default_rng(7)
    tokens = ["0", "-0.0", "1", "-2.5", "0.1", "1e-45", "1.4e-45", "3.4028235e38", "3.5e38", "1e400", "-1e-400",
              "6e-8", "1.00048828125", "1.0009765625000001", "0.333333343", "inf", "-inf", "Infinity", "nan",
              ".5", "5.", "+7", "1E3", "-123456789012"]
    tokens += [repr(float(v)) for v in rng.standard_normal(40)]
    tokens += [f"{v:.9g}" for v in rng.uniform(-1, 1, 40).astype(np.float32)]
    txt = tmp_path / "v.txt"
    lines = (" ".join(tokens[i:i + 13]) for i in range(0, len(tokens), 13))
    txt.write_text(f"8 {len(tokens) // 8}\n" + "\n".join(lines))
    image = data_image(txt)
    assert image != txt and image.read_bytes().startswith(b"RVTIMG1\0")
    from_text, from_image = _read(dump, txt, FLOAT_DTYPES), _read(dump, image, FLOAT_DTYPES)
    assert from_text.returncode == 0, from_text.stdout + from_text.stderr
    assert from_image.stdout == from_text.stdout  # same bits, same shape, and messages name the TXT
    assert f" 8x{len(tokens) // 8} {txt}:" in from_image.stdout


def test_integer_image_reads_the_same_values_as_the_text_as_ints_and_as_floats(dump, tmp_path, isolated_cache):
    values = [0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63), 7, +3, 42]
    txt = tmp_path / "i.txt"
    txt.write_text("4 4\n" + " ".join(str(v) for v in values[:8]) + "\n" + " ".join(str(v) for v in values[8:]) +
                   " \n")
    image = data_image(txt)
    assert image != txt
    assert image_values(txt.read_bytes())[2] == KIND_INT
    dtypes = INT_DTYPES + FLOAT_DTYPES
    from_text, from_image = _read(dump, txt, dtypes), _read(dump, image, dtypes)
    assert from_text.returncode == 0, from_text.stderr
    assert from_image.stdout == from_text.stdout


def test_a_float_file_read_as_integers_is_refused_naming_the_text(dump, tmp_path, isolated_cache):
    txt = tmp_path / "f.txt"
    txt.write_text("1 2\n1.5 2\n")
    image = data_image(txt)
    assert image_values(txt.read_bytes())[2] == KIND_FLOAT
    done = _read(dump, image, ["i32"])
    assert done.returncode == 2
    assert f"{txt}:2: t is an integer tensor" in done.stdout + done.stderr


@pytest.mark.parametrize("content", [
    b"2 2\n1 2 3\n",  # short: the harness says which line
    b"2 2\n1 2 3 4 5\n",  # long
    b"2\n1 2\n",  # header
    b"1 2 3\n4 5\n",  # values on the header line
    b"1 2\n0x1p3 1\n",  # a hex float strtod takes and float() does not
    b"1 2\n1_0 1\n",  # float() takes it, strtod does not
    b"1 2\n-0 1\n",  # -0: 0 as an integer, -0.0 as a float: only the text keeps both readings
    b"1 2\n9223372036854775808 1\n",  # beyond int64
    b"1 2\n1 2\0 3\n",  # a NUL: the harness stops reading there
    b"1 2\nnan(0x1) 1\n",
    b"",
])
def test_anything_unusual_keeps_the_text(tmp_path, isolated_cache, content):
    txt = tmp_path / "odd.txt"
    txt.write_bytes(content)
    assert image_values(content) is None
    assert data_image(txt) == txt


def test_an_image_is_made_once_per_content_and_path(tmp_path, isolated_cache):
    txt = tmp_path / "v.txt"
    txt.write_text("1 3\n1 2 3\n")
    first = data_image(txt)
    assert data_image(txt) == first and len(list(isolated_cache.rglob("*.bin"))) == 1
    txt.write_text("1 3\n1 2 4\n")
    assert data_image(txt) != first  # changed content: a new image
    other = tmp_path / "w.txt"
    other.write_text("1 3\n1 2 4\n")
    assert data_image(other) not in (first, data_image(txt))  # another path: messages name it
