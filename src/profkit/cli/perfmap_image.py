"""``profkit perfmap from-image`` and ``verify``: the R2R image side of perf maps.

Why a module of its own: both actions read a ReadyToRun image (:mod:`profkit.formats.r2r`)
rather than maps and bases: one builds the r2rmap crossgen2 ``--perfmap`` would write,
the other checks a map's signature against the image (or recomputes it).
"""

from __future__ import annotations

import argparse
import sys

from profkit._atomic import write_stdout
from profkit.cli.perfmap_common import refuse_overwrite, say
from profkit.errors import FormatError, PerfMapFormatError
from profkit.formats.perfmap._io import read_input, write_atomic
from profkit.formats.perfmap.pe import read_pe
from profkit.formats.perfmap.r2rmap import R2RPerfMap, read_r2rmap, write_r2rmap
from profkit.formats.perfmap.signature import verify_map
from profkit.formats.r2r import NotReadyToRunError, build_r2rmap, image_signature, load_r2r_image


def run_from_image(args: argparse.Namespace) -> int:
    """The ``from-image`` handler: write the r2rmap of an R2R image."""
    out = args.output
    refuse_overwrite(out, [args.image])
    image = load_r2r_image(args.image)
    data = write_r2rmap(build_r2rmap(image))
    if out == "-":
        write_stdout(data)
    else:
        write_atomic(out, data)
    n = data.count(b"\n") - 5
    print(
        f"profkit: wrote {n} method entries for {len(image.components)} assembly(ies) "
        f"(ReadyToRun {image.version}, {image.architecture}/{image.os}) to "
        f"{'stdout' if out == '-' else out}",
        file=sys.stderr,
    )
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """The ``verify`` handler: 0 if the map belongs to the image, 1 if not."""
    image = read_pe(read_input(args.image, FormatError), path=args.image)
    m = read_r2rmap(read_input(args.map, PerfMapFormatError), path=args.map)
    result = verify_map(image, m, args.map)
    if result is None:
        return _verify_without_entry(args, m)
    sig = result.map_signature.hex().upper() if result.map_signature else "none"
    lines = [
        f"image: {args.image} ({image.machine_description()})",
        f"  expects: {result.image_file_name} v{result.image_version}, "
        f"signature {result.image_signature.hex().upper()}",
        f"map:   {args.map}",
        f"  header:  v{result.map_version}, signature {sig}",
    ]
    if result.recomputed is not None:
        lines.append(f"  recomputed from the image's MVID {image.mvid()}: "
                     f"{result.recomputed.hex().upper()}")  # fmt: skip
    lines.extend(f"note: {note}" for note in result.notes)
    if result.ok:
        lines.append("OK: the map belongs to the image (signatures match)")
    else:
        lines.append("MISMATCH: the map was not generated for this image (signatures differ)")
    say(lines)
    return 0 if result.ok else 1


def _verify_without_entry(args: argparse.Namespace, m: R2RPerfMap) -> int:
    """An image built without ``--perfmap`` (every framework image) has no type-21
    entry: recompute the signature crossgen2 would have given it (its input MVIDs and
    target, spec §1.6) and compare that with the map's header."""
    try:
        image = load_r2r_image(args.image)
    except NotReadyToRunError:
        raise FormatError(
            "malformed",
            "no R2R PerfMap debug entry (type 21) (crossgen2 adds it with --perfmap) and no "
            "ReadyToRun header to recompute the signature from",
            path=args.image,
        ) from None
    expected = image_signature(image)
    sig = m.header.signature
    os_token, arch_token, abi_token = image.tokens
    lines = [
        f"image: {args.image} (ReadyToRun {image.version}, {image.architecture}/{image.os}; "
        "no R2R PerfMap debug entry: built without --perfmap)",
        f"  signature recomputed from its MVID(s) and target: {expected.hex().upper()}",
        f"map:   {args.map}",
        f"  header:  v{m.header.version}, signature {sig.hex().upper() if sig else 'none'}",
    ]
    tokens = (m.header.os, m.header.architecture, m.header.abi)
    if tokens != (os_token, arch_token, abi_token):
        lines.append(
            f"note: the map's OS/architecture/ABI tokens {tokens} are not the image's "
            f"{(os_token, arch_token, abi_token)}"
        )
    ok = sig is not None and sig == expected
    if ok:
        lines.append("OK: the map belongs to the image (signatures match)")
    else:
        lines.append("MISMATCH: the map was not generated for this image (signatures differ)")
    say(lines)
    return 0 if ok else 1
