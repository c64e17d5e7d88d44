"""Saving a profile in pieces: the format of :mod:`profkit.calltree.file`, streamed.

Why not ``file.save``: that builds the whole JSON document as Python lists, then one
string, then bytes — three copies of the biggest thing profkit holds, and a Python pass
over every node. Here the document is written piece by piece into the atomic output
(gzip-compressed on the way for ``.gz`` names): small parts through ``json.dumps``, each
thread's nodes either as the root offers them ready-made — a root with a ``flat_json()``
method returning the ``nodes`` array's content as pieces of bytes (the ELT profiler's C
export does, while its tree is unread: ``profkit.profilers.elt.flat``), or None — or
flattened here a batch at a time. Peak memory is one piece or batch, not the document.

The bytes are the same document ``file.save`` writes (``load`` reads both; a test
compares them). A save taking longer than :data:`ANNOUNCE_AFTER` seconds says so on
``announce`` (``profkit run`` passes stderr when it is a terminal), so the end of a long
run is not a silent wait.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

from profkit._atomic import AtomicOutput
from profkit.calltree.document import FORMAT, VERSION, node_rows
from profkit.calltree.model import CallNode, CallProfile, Frame

try:  # json's own C encoder (json.dumps uses it): see _dumps
    from _json import encode_basestring_ascii as _encode_ascii
    from _json import make_encoder as _make_encoder
except ImportError:  # pragma: no cover - a Python without _json
    _encode_ascii = _make_encoder = None  # type: ignore[misc,assignment]

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import IO, Any

#: Seconds a save may take before it is announced.
ANNOUNCE_AFTER = 1.0
#: Rows flattened (or spans written) per piece.
BATCH = 4096


def save(
    profile: CallProfile,
    path: str | os.PathLike[str],
    *,
    announce: IO[str] | None = None,
) -> None:
    """Write ``profile`` to ``path`` atomically, as ``calltree.file.save`` does."""
    target = os.fspath(path)
    timer = _announcer(announce, target, profile)
    try:
        with AtomicOutput(target) as raw:
            if target.rstrip(os.sep).endswith(".gz"):
                import gzip

                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                    _write(profile, gz.write)
            else:
                _write(profile, raw.write)
    finally:
        if timer is not None:
            timer.cancel()


def _announcer(stream: IO[str] | None, target: str, profile: CallProfile) -> Any:
    if stream is None:
        return None

    def say() -> None:
        try:
            stream.write(f"profkit: saving the profile to {target} ...\n")
            stream.flush()
        except (OSError, ValueError):
            pass  # nowhere to say it

    timer = threading.Timer(ANNOUNCE_AFTER, say)
    timer.daemon = True
    timer.start()
    return timer


def _dumps(value: Any) -> bytes:
    """``json.dumps(value, separators=(",", ":"), default=repr)``, in UTF-8: through json's C
    encoder when there is one, as json.dumps itself goes (the same text), without importing
    the json package: its import compiles six regular expressions (``re`` with them), which
    each forked child of a profiled program paid to save its profile, ~20 M instructions
    (issue 22, item 13)."""
    if _make_encoder is None:
        import json

        return json.dumps(value, separators=(",", ":"), default=repr).encode("utf-8")
    encode = _make_encoder({}, repr, _encode_ascii, None, ":", ",", False, False, True)
    return "".join(encode(value, 0)).encode("utf-8")


def _write(profile: CallProfile, write: Callable[[bytes], Any]) -> None:
    write(b'{"format":' + _dumps(FORMAT) + b',"version":' + _dumps(VERSION))
    write(b',"mode":' + _dumps(profile.mode) + b',"metadata":' + _dumps(profile.metadata))
    write(b',"frames":' + _frames_json(profile.frames))
    write(b',"threads":[')
    for i, thread in enumerate(profile.threads):
        head = b"," if i else b""
        head += b'{"thread_id":' + _dumps(thread.thread_id) + b',"name":' + _dumps(thread.name)
        if thread.native_id is not None:  # optional keys, as file.to_json writes them
            head += b',"native_id":' + _dumps(thread.native_id)
        if thread.pid is not None:
            head += b',"pid":' + _dumps(thread.pid)
        write(head + b',"nodes":[')
        for piece in _node_pieces(thread.root):
            write(piece)
        write(b"]}")
    write(b'],"spans":[')
    spans = profile.spans
    for start in range(0, len(spans), BATCH):
        rows = [
            [s.thread, s.frame, s.start_ns, s.end_ns, s.depth] for s in spans[start : start + BATCH]
        ]
        text = _dumps(rows)[1:-1]
        write(b"," + text if start else text)
    write(b"]}")


def _frames_json(frames: list[Frame]) -> bytes:
    """``_dumps`` of the frames as ``[name, file, line]`` lists (the same text), each file's
    text made once: a run's frames come from a tenth as many files (sympy: ~4,700 frames,
    ~560 files), and the encoder's lists of lists cost ~1.6 times this (issue #26)."""
    files: dict[str, str] = {}
    parts: list[str] = []
    for frame in frames:
        name, file, line = frame.name, frame.file, frame.line
        if _encode_ascii is None or type(name) is not str or type(file) is not str:
            return _dumps([[f.name, f.file, f.line] for f in frames])
        if type(line) is not int:  # a bool, a float: the encoder's text for it
            return _dumps([[f.name, f.file, f.line] for f in frames])
        text = files.get(file)
        if text is None:
            text = files[file] = _encode_ascii(file)
        parts.append(f"[{_encode_ascii(name)},{text},{line}]")
    return ("[" + ",".join(parts) + "]").encode("utf-8")


def _node_pieces(root: CallNode) -> Iterator[bytes]:
    """The thread's ``nodes`` array content, in pieces (pre-order, as ``file`` writes)."""
    ready = getattr(root, "flat_json", None)
    pieces = ready() if callable(ready) else None
    if pieces is not None:
        yield from pieces
        return
    batch: list[list[int]] = []
    first = True
    for row in node_rows(root):
        batch.append(row)
        if len(batch) >= BATCH:
            text = _dumps(batch)[1:-1]
            yield text if first else b"," + text
            first, batch = False, []
    if batch:
        text = _dumps(batch)[1:-1]
        yield text if first else b"," + text
