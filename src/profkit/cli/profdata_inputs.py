"""Which files `profkit profdata merge` reads, with which weights, in llvm-profdata's order.

Why a module of its own: the inputs come from three places (positional paths and
directories, ``--weighted-input W,FILE``, ``-f`` list files), each with its own syntax
and errors, and their order decides which record wins when two disagree.
"""

from __future__ import annotations

import argparse
import os

from profkit.errors import UsageError

#: llvm-profdata's weights are uint64_t.
_MAX_WEIGHT = (1 << 64) - 1


def _clip(text: str, limit: int = 80) -> str:
    """``text`` cut for an error line (a 5,000-digit weight is not echoed back whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse_weight(text: str, where: str) -> int:
    digits = text.strip().lstrip("+")
    if digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) > len(str(_MAX_WEIGHT)):
        # (int() refuses over 4,300 digits with a ValueError: judge by length first)
        raise UsageError(f"{where}: weight must be below 2^64 ({len(digits)} digits given)")
    try:
        weight = int(text)
    except ValueError:
        raise UsageError(f"{where}: weight {text[:40]!r} is not an integer") from None
    if weight < 1:
        raise UsageError(f"{where}: weight must be at least 1, not {weight}")
    if weight > _MAX_WEIGHT:
        raise UsageError(f"{where}: weight must be below 2^64, not {weight}")
    return weight


def _expand(path: str, weight: int, out: list[tuple[str, int]]) -> None:
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                out.append((os.path.join(root, name), weight))
    elif os.path.exists(path):
        out.append((path, weight))
    else:
        raise UsageError(f"{path}: no such file or directory")


def gather_inputs(args: argparse.Namespace) -> list[tuple[str, int]]:
    """Every input as (path, weight) in llvm-profdata's order.

    That is: positional inputs, then ``--weighted-input`` ones, then ``--input-files``
    lists — the order decides which record wins when two disagree, and how ``-j``
    deals inputs to writers. Directories are walked in sorted order (LLVM: directory
    order, which is not reproducible).
    """
    found: list[tuple[str, int]] = []
    for path in args.inputs:
        _expand(path, 1, found)
    for item in args.weighted_input:
        weight_text, sep, path = item.partition(",")
        if not sep or not path:
            raise UsageError(f"--weighted-input={_clip(item)}: expected W,FILE")
        _expand(path, _parse_weight(weight_text, f"--weighted-input={_clip(item)}"), found)
    for listing in args.input_files:
        try:
            with open(listing, encoding="utf-8", errors="surrogateescape") as fh:
                lines = fh.read().splitlines()
        except OSError as exc:
            raise UsageError(f"{listing}: cannot read input list: {exc.strerror}") from None
        for number, raw_line in enumerate(lines, start=1):
            line = raw_line.strip()
            if not line or line.startswith("#"):
                continue
            weight = 1
            head, sep, tail = line.partition(",")
            if sep and head.strip().isdigit():
                weight = _parse_weight(head.strip(), f"{listing}: line {number}")
                line = tail.strip()
            _expand(line, weight, found)
    if not found:
        raise UsageError("no input files")
    return found
