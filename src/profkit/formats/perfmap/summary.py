"""What ``profkit perfmap show`` reports: format, header, counts, size and layout stats.

Kept out of the CLI so the numbers can be tested and reused (e.g. by a report).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from profkit.formats.perfmap._lines import LineStyle
from profkit.formats.perfmap._names import as_list
from profkit.formats.perfmap.pe import PEImage
from profkit.formats.perfmap.perfinfo import PerfInfo
from profkit.formats.perfmap.perfpid import PerfMap
from profkit.formats.perfmap.r2rmap import R2RPerfMap


def _style(style: LineStyle) -> dict[str, Any]:
    return {
        "address_prefix": style.prefix,
        "address_case": "upper" if style.address_upper else "lower",
        "address_width": style.address_width,
        "size_case": "upper" if style.size_upper else "lower",
        "size_width": style.size_width,
        "line_end": "CRLF" if style.newline == "\r\n" else "LF",
    }


def entry_stats(starts: np.ndarray, sizes: np.ndarray, names: Sequence[str]) -> dict[str, Any]:
    """Counts, size statistics, address range, duplicates and overlaps of a set of entries."""
    n = len(names)
    out: dict[str, Any] = {"entries": n}
    if not n:
        return out
    names = as_list(names)
    order = np.argsort(starts, kind="stable")
    s, z = starts[order], sizes[order]
    # saturating: an entry reaching past 2**64 (garbage, but readable) must not wrap to a
    # small end and hide both the true range and its overlaps
    ends = s + np.minimum(z, np.uint64((1 << 64) - 1) - s)
    fits = int(z.max()) * n < 1 << 64  # else the uint64 sum would wrap too
    total = int(z.sum(dtype=np.uint64)) if fits else sum(z.tolist())
    out.update(
        {
            "lowest": int(s[0]),
            "highest_end": int(ends.max()),
            "size_min": int(z.min()),
            "size_median": int(np.median(z)),
            "size_max": int(z.max()),
            "size_total": total,
            "zero_size": int((z == 0).sum()),
            "duplicate_starts": int((s[1:] == s[:-1]).sum()),
            "overlapping_neighbours": int((ends[:-1] > s[1:]).sum()),
            "distinct_names": len(set(names)),
            "names_shorter_than_3": sum(1 for name in names if len(name) < 3),
        }
    )
    return out


def describe_r2rmap(m: R2RPerfMap) -> dict[str, Any]:
    """Header decoded to names plus entry stats (RVAs)."""
    header = m.header.describe()
    header["symstore_valid"] = m.header.is_symstore_valid
    return {
        "format": "r2rmap",
        "header": header,
        **entry_stats(m.rvas, m.lengths, m.names),
        "style": _style(m.style),
        "skipped_lines": len(m.skipped),
    }


def symbol_server_key(m: R2RPerfMap, file_name: str) -> str | None:
    """The SSQP key symbol servers index the map under (spec §1.10)."""
    sig, version = m.header.signature, m.header.version
    if sig is None or version is None:
        return None
    name = file_name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return f"{name}/r2rmap-v{version}-{sig.hex()}/{name}"


def describe_perf_map(m: PerfMap) -> dict[str, Any]:
    """Writer guess, number style and entry stats (absolute addresses)."""
    return {
        "format": "perf-map",
        "writer": m.writer_guess(),
        **entry_stats(m.starts, m.sizes, m.names),
        "style": _style(m.style),
        "skipped_lines": len(m.skipped),
    }


def describe_perfinfo(info: PerfInfo) -> dict[str, Any]:
    """Each ImageLoad: path, MVID, base (None = not recorded, 0 = not R2R)."""
    loads = info.image_loads()
    return {
        "format": "perfinfo",
        "records": len(info.records),
        "image_loads": [
            {"path": r.path, "mvid": str(r.mvid), "base": r.base, "base_text": r.base_text}
            for r in loads
        ],
        "r2r_images": sum(1 for r in loads if r.base),
    }


def describe_image(image: PEImage) -> dict[str, Any]:
    """An R2R image: machine, MVID, debug entry types and its type-21 perf-map entry."""
    entry = image.perfmap_info()
    mvid = image.mvid()
    return {
        "format": "pe-image",
        "machine": image.machine_description(),
        "mvid": str(mvid) if mvid else None,
        "debug_entry_types": [e.type for e in image.debug_entries],
        "perfmap_entry": None
        if entry is None
        else {
            "signature": entry.signature.hex().upper(),
            "version": entry.version,
            "file_name": entry.file_name,
        },
    }


def text_lines(info: dict[str, Any], indent: str = "") -> list[str]:
    """``show``'s text form of a ``describe_*`` dict: ``key: value``, nested by indent."""
    lines = []
    for key, value in info.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            lines.extend(text_lines(value, indent + "  "))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{indent}{key}:")
            for item in value:
                lines.append(
                    f"{indent}  - " + ", ".join(f"{k}={_text(k, v)}" for k, v in item.items())
                )
        else:
            lines.append(f"{indent}{key}: {_text(key, value)}")
    return lines


def _text(key: str, value: Any) -> str:
    """Addresses in hex (the JSON form keeps integers); a prefix quoted so '' shows."""
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and key in ("lowest", "highest_end", "base")
    ):
        return f"0x{value:x}"
    if isinstance(value, str) and key == "address_prefix":
        return repr(value)
    return str(value)
