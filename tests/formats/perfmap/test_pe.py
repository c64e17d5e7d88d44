"""PE debug directory (type 21), MVID from metadata, signature algorithm, verify."""

from __future__ import annotations

import importlib.util
import os
import random
import uuid

import pytest

from profkit.errors import FormatError
from profkit.formats.perfmap.pe import read_pe
from profkit.formats.perfmap.r2rmap import read_r2rmap
from profkit.formats.perfmap.signature import compute_signature, verify_map

from .conftest import FIXTURES, R2RMAP_SAMPLE

DLL = FIXTURES / "MinimalR2R.dll"
MAP = FIXTURES / "MinimalR2R.ni.r2rmap"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "make_minimal_pe", FIXTURES / "make_minimal_pe.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_fixture_equals_generator_output() -> None:
    built = _generator().build()
    assert built[DLL.name] == DLL.read_bytes()
    assert built[MAP.name] == MAP.read_bytes()


def test_minimal_image_fields() -> None:
    gen = _generator()
    image = read_pe(DLL.read_bytes(), path=str(DLL))
    assert image.machine_description() == "X64/Linux"
    assert [e.type for e in image.debug_entries] == [21, 16]
    info = image.perfmap_info()
    assert info is not None
    assert (info.signature, info.version, info.file_name) == (gen.signature(), 1, MAP.name)
    assert image.mvid() == gen.MVID


def test_signature_of_the_real_symstore_pair() -> None:
    # spec §1.6: verified on the symstore sample (MVID from its image, tokens from its map)
    mvid = uuid.UUID("99d3f272-c6a8-429b-a694-647a7912d178")
    assert mvid.bytes_le.hex() == "72f2d399a8c69b42a694647a7912d178"
    sig = compute_signature(
        [("System.ComponentModel.EventBasedAsync", mvid)], os=2, architecture=3, abi=1
    )
    assert sig == read_r2rmap(R2RMAP_SAMPLE.read_bytes()).header.signature


def test_signature_sorts_inputs_ordinal_ignore_case() -> None:
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    one = compute_signature([("b", b), ("A", a)], os=2, architecture=3, abi=1)
    two = compute_signature([("A", a), ("b", b)], os=2, architecture=3, abi=1)
    assert one == two
    import hashlib
    import struct

    want = hashlib.md5(a.bytes_le + b.bytes_le + struct.pack("<III", 2, 3, 1)).digest()
    assert one == want


def test_verify_match_and_mismatch() -> None:
    image = read_pe(DLL.read_bytes())
    good = read_r2rmap(MAP.read_bytes())
    result = verify_map(image, good, str(MAP))
    assert result is not None and result.ok and result.recomputed == result.image_signature
    bad = read_r2rmap(R2RMAP_SAMPLE.read_bytes())
    result = verify_map(image, bad, str(R2RMAP_SAMPLE))
    assert result is not None and not result.ok
    assert any("expects a map named" in n for n in result.notes)


def test_not_a_pe() -> None:
    with pytest.raises(FormatError) as info:
        read_pe(b"\x7fELF" + bytes(100), path="x.so")
    assert info.value.kind == "bad_magic" and "x.so" in str(info.value)


def _exercise(data: bytes) -> None:
    try:
        image = read_pe(data, path="cut.dll")
        image.perfmap_info()
        image.mvid()
    except FormatError as err:
        assert err.path == "cut.dll"


def test_every_truncation_of_the_minimal_image() -> None:
    data = DLL.read_bytes()
    for cut in range(len(data) + 1):
        _exercise(data[:cut])


def test_mutations_never_escape() -> None:
    rng = random.Random(5)
    data = DLL.read_bytes()
    for _ in range(1500):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(0x40, 0x400)] = rng.randrange(256)
        _exercise(bytes(mutated))


@pytest.mark.skipif(
    not os.environ.get("PROFKIT_R2R_SAMPLE_DLL"),
    reason="set PROFKIT_R2R_SAMPLE_DLL to symstore's System.ComponentModel.EventBasedAsync.dll",
)
def test_real_crossgen2_image() -> None:
    path = os.environ["PROFKIT_R2R_SAMPLE_DLL"]
    with open(path, "rb") as fh:
        image = read_pe(fh.read(), path=path)
    result = verify_map(image, read_r2rmap(R2RMAP_SAMPLE.read_bytes()), str(R2RMAP_SAMPLE))
    assert result is not None and result.ok and not result.notes
    assert [e.type for e in image.debug_entries] == [21, 2, 16]
    assert str(image.mvid()) == "99d3f272-c6a8-429b-a694-647a7912d178"
