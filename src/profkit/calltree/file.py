"""The saved profile file: versioned JSON (gzip-compressed when the name ends in ``.gz``).

Layout (version 1, documented in ``docs/profile-format.md``)::

    {"format": "profkit.calltree", "version": 1, "mode": "trace",
     "metadata": {...},
     "frames":  [[name, file, line], ...],
     "threads": [{"thread_id": 1, "name": "MainThread",
                  "nodes": [[parent, frame, calls, inclusive_ns, exclusive_ns, min_ns, max_ns], ...]}],
     "spans":   [[thread, frame, start_ns, end_ns, depth], ...]}

Trees are stored *flat*, in pre-order, each node naming its parent's position (node 0 is
the root, parent -1, frame -1). That keeps the JSON nesting depth constant however deep
the program recursed, so neither saving nor loading recurses, and a hostile file cannot
exhaust the stack (pyinstrument's nested session JSON is the anti-example).

:func:`load` checks every field and raises :class:`~profkit.errors.ProfileDataError`
naming the file and a JSON-pointer location (``/threads/0/nodes/7/2``) for anything wrong,
never a ``KeyError``. Gzip input is recognised by its magic bytes, whatever the name.

This module turns bytes into a JSON document and back; the document's structure is
:mod:`.document`'s, and :func:`combine` (re-exported here) is :mod:`.combining`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from profkit._atomic import write_atomic
from profkit._inputs import PREFIX_BYTES, InputError, gunzip, is_gzip, open_input
from profkit.calltree.combining import combine
from profkit.calltree.document import FORMAT, VERSION, Progress, from_json, to_json
from profkit.calltree.model import CallProfile
from profkit.errors import FormatErrorKind, ProfileDataError

__all__ = [
    "FORMAT",
    "VERSION",
    "combine",
    "from_json",
    "load",
    "loads",
    "save",
    "to_json",
    "write_atomic",
]

#: Largest (decompressed) file accepted: a guard against decompression bombs.
MAX_BYTES = 1 << 30


def save(profile: CallProfile, path: str | os.PathLike[str]) -> None:
    """Write ``profile`` to ``path`` atomically (temp file in the same directory + rename).

    A name ending in ``.gz`` is gzip-compressed. Metadata values that JSON cannot hold are
    stored as their ``repr`` so a run never loses its profile over an odd metadata value.
    """
    data = json.dumps(to_json(profile), separators=(",", ":"), default=repr).encode("utf-8")
    target = os.fspath(path)
    if target.rstrip(os.sep).endswith(".gz"):
        import gzip  # only for .gz names: most runs never need it

        data = gzip.compress(data, compresslevel=6, mtime=0)
    write_atomic(target, data)


def load(path: str | os.PathLike[str], progress: Progress | None = None) -> CallProfile:
    """Read and validate a saved profile (``-`` reads stdin); raise
    :class:`ProfileDataError` for anything wrong.

    The file is opened by :func:`profkit._inputs.open_input` (no devices, no FIFO without
    a writer, size checked before reading) and judged by its first bytes before the rest
    is read: a 4 GB file or ``/dev/urandom`` behind stdin is refused after 64 KiB.
    ``progress(stage, done, total)`` is told each step (reading, parsing, building).
    """
    name = os.fspath(path)
    try:
        inp = open_input(name, what="profkit profile")
    except InputError as exc:  # callers catch ProfileDataError for any unreadable profile
        raise ProfileDataError("unreadable", exc.reason, path=exc.path) from None
    if progress is not None:
        progress("reading", 0, 0)
    with inp:
        head = inp.prefix()
        inp.check_size(MAX_BYTES, ProfileDataError)
        if is_gzip(head):
            raw = _gunzip(inp.chunks(), inp.name)
            compressed = True
        else:
            _sniff(head, inp.name)
            raw = inp.read_all(MAX_BYTES, ProfileDataError)
            compressed = False
    return _parse(raw, inp.name, compressed, progress)


def loads(raw: bytes, *, path: str | None = None) -> CallProfile:
    """Parse a saved profile from bytes (gzip or plain JSON)."""
    if len(raw) > MAX_BYTES:
        raise ProfileDataError("too_large", f"file is larger than {MAX_BYTES} bytes", path=path)
    compressed = is_gzip(raw)
    if compressed:
        raw = _gunzip(iter((raw,)), path)
    return _parse(raw, path, compressed)


def _sniff(head: bytes, path: str | None) -> None:
    """Refuse at once what cannot be a profile: the first non-blank byte must be ``{``."""
    text = head.lstrip()
    if text and text[:1] != b"{":
        raise ProfileDataError(
            "bad_magic", "not a profkit profile (it is not a JSON object)", path=path, offset=0
        )


def _parse(
    raw: bytes, path: str | None, compressed: bool, progress: Progress | None = None
) -> CallProfile:
    if not raw or raw.isspace():  # isspace stops at the first byte; strip() copied the file
        raise ProfileDataError("truncated", "empty file", path=path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = " (decompressed)" if compressed else ""
        raise ProfileDataError(
            "malformed", f"not UTF-8 text{where}", path=path, offset=exc.start
        ) from None
    del raw
    if text.lstrip()[:1] != "{":
        raise ProfileDataError(
            "bad_magic", "not a profkit profile (it is not a JSON object)", path=path, offset=0
        )
    if progress is not None:
        progress("parsing", 0, 0)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        # a string left open runs to the end of the text (a newline inside one is an
        # "Invalid control character"), so it is a cut file like any other end reached early
        cut = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        kind: FormatErrorKind = "truncated" if cut else "malformed"
        where = " (in the decompressed data)" if compressed else ""
        # json's "Unterminated string starting at" already ends with "at"
        raise ProfileDataError(
            kind,
            f"not valid JSON{where}: {exc.msg.removesuffix(' at')} at column {exc.colno}",
            path=path,
            line=exc.lineno,
        ) from None
    except RecursionError:
        raise ProfileDataError("too_large", "JSON nested too deeply", path=path) from None
    except ValueError as exc:  # e.g. an integer with more digits than int() accepts
        raise ProfileDataError("malformed", f"not valid JSON: {exc}", path=path) from None
    del text
    return from_json(doc, path=path, consume=True, progress=progress)


def _gunzip(chunks: Iterator[bytes], path: str | None) -> bytes:
    """Decompress with :func:`profkit._inputs.gunzip`'s size and ratio caps, judging the
    first decompressed bytes before going on (a bomb of zeros stops after one piece)."""
    out = bytearray()
    sniffed = False
    for piece in gunzip(chunks, limit=MAX_BYTES, name=path or "<data>", error=ProfileDataError):
        out += piece
        if not sniffed and (len(out) >= 64 or not out.isspace()):
            _sniff(bytes(out[:PREFIX_BYTES]), path)
            sniffed = True
    return bytes(out)
