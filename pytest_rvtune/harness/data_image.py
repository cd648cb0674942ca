"""A golden TXT file's binary image: the values the harness would parse, laid out so it reads them in one go.

Why: under QEMU, parsing text is most of a run. For the 160^3 matmul, `strtod` over three 25,600-value files
executes ~90M guest instructions against ~1.6M in the kernel launches; QEMU spends most of an item's run on
it. The image holds the same values as the harness's own parse would give, so results do not change:

- floats as the IEEE double Python's ``float()`` parses, which is correctly rounded like glibc's ``strtod``
  (the harness then rounds each to the tensor's dtype exactly as it does a parsed value: rvtune_store_float);
- integers as int64 (then rvtune_store_int, as after ``strtoll``).

Only a file whose every token this module can parse exactly as the harness does gets an image: anything
unusual (hex floats, an int beyond int64, ``-0`` in an integer file, a NUL byte, a header the harness would
refuse, a count that does not match) keeps the TXT path, so the harness reads the text and reports the fault
naming file and line, as before. The image carries the TXT's path: the harness's messages name the TXT.

Images are build-cache entries under ``cache_dir()/data-image/<key[:2]>/<key>/image.bin`` (key: the TXT's
sha256, its path, the format version), made once per file, shared by every config and worker, and checked
against the entry's manifest before use. Nothing here knows pytest.

Format (little-endian): ``RVTIMG1\\0``, int64 rows, int64 cols, int32 kind (1 int64, 2 float64), int32 length
of the TXT path, the path's bytes, zero padding to a multiple of 8, then rows*cols values.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.hashing import sha256_file

MAGIC = b"RVTIMG1\0"
KIND_INT = 1
KIND_FLOAT = 2
#: Bump when the layout or the parse rules change: older images are then never read.
IMAGE_VERSION = 1

# Tokens parsed here exactly as the harness parses them (strtoll base 10 / strtod): decimal integers, decimal
# floats with an optional exponent, inf/infinity/nan. Python's float() also takes '1_0' and surrounding
# whitespace, strtod also hex floats and nan(chars): neither is matched, so such a file keeps its text.
_INT = re.compile(rb"[+-]?[0-9]+")
_FLOAT = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I)
_HEADER_INT = re.compile(rb"[+-]?[0-9]+")
_INT64 = (-(2**63), 2**63 - 1)


def image_values(text: bytes) -> tuple[int, int, int, array] | None:
    """(rows, cols, kind, values) of a TXT file's bytes when every token parses exactly; None otherwise."""
    if b"\0" in text:
        return None  # the harness reads a C string: it would stop at the NUL
    first, _, rest = text.partition(b"\n")
    header = first.split()
    if len(header) != 2 or not all(_HEADER_INT.fullmatch(h) for h in header):
        return None
    rows, cols = int(header[0]), int(header[1])
    if rows < 0 or cols < 0 or rows * cols > 2**40:
        return None
    tokens = rest.split()  # bytes.split(): the harness's whitespace (space, \t \n \v \f \r), nothing more
    if len(tokens) != rows * cols:
        return None
    if all(_INT.fullmatch(t) for t in tokens):
        ints = [int(t) for t in tokens]
        if any(not _INT64[0] <= v <= _INT64[1] for v in ints):
            return None  # strtoll would clamp and the harness refuse it: let it say so
        if any(v == 0 and t.startswith(b"-") for v, t in zip(ints, tokens, strict=True)):
            return None  # '-0': 0 to strtoll, -0.0 to strtod; only the text keeps both readings
        return rows, cols, KIND_INT, array("q", ints)
    if not all(_FLOAT.fullmatch(t) for t in tokens):
        return None
    return rows, cols, KIND_FLOAT, array("d", [float(t) for t in tokens])


def image_bytes(txt: Path, rows: int, cols: int, kind: int, values: array) -> bytes:
    path = str(txt).encode()
    if sys.byteorder != "little":  # the image is little-endian, as every RISC-V and x86 reader is
        values = array(values.typecode, values)
        values.byteswap()
    head = MAGIC + struct.pack("<qqii", rows, cols, kind, len(path)) + path
    head += b"\0" * (-len(head) % 8)
    return head + values.tobytes()


#: The marker an entry holds instead of an image when the TXT has no exact one (the harness reads the text).
TEXT_MARKER = "use-text"


def data_image(txt: Path) -> Path:
    """The binary image of golden file ``txt``, made on first use; ``txt`` itself when no exact image exists.

    An image is a build-cache entry (compiler/cache.py): checked against its manifest before use, so an image
    whose values changed on disk is made again (and reported), never read as the golden data."""
    txt = Path(txt)
    key = cache_key(kind="data-image", version=IMAGE_VERSION, sha256=sha256_file(txt), path=str(txt))

    def build(tmp: Path) -> None:
        parsed = image_values(txt.read_bytes())
        if parsed is None:
            (tmp / TEXT_MARKER).write_text(f"{txt}: no exact image; the harness reads the text\n")
        else:
            (tmp / "image.bin").write_bytes(image_bytes(txt, *parsed))

    entry, _ = BuildCache(paths.cache_dir()).get_or_build("data-image", key, build)
    image = entry / "image.bin"
    return image if image.is_file() else txt
