"""The .NET runtime's diagnostics port: finding it, and the IPC protocol's EventPipe commands.

Every CoreCLR since 3.0 listens on a Unix socket ``$TMPDIR/dotnet-diagnostic-{pid}-{key}-socket``
(``key``: the process's start time, so a reused pid does not find a dead process's socket).
A request is a 20-byte header — ``DOTNET_IPC_V1\\0``, uint16 total size, uint8 command set,
uint8 command, uint16 reserved — and a payload; the reply has the same header, command set
``0xFF`` and command ``0x00`` (OK) or ``0xFF`` (error, payload: an HRESULT). Layouts from
dotnet/diagnostics ``documentation/design-docs/ipc-protocol.md`` and the runtime's
``ds-protocol.h``.

``CollectTracing`` (set 0x02, command 0x02) answers OK with a uint64 session id, and the same
connection then carries the session's nettrace stream until the session ends; ``StopTracing``
(command 0x01), sent on a second connection, ends it (on 3.1 the runtime then writes the
rundown: every loaded method's name and code range). Nothing is loaded into the target.
"""

from __future__ import annotations

import os
import re
import socket
import struct
from collections.abc import Sequence

from profkit._record import record
from profkit.errors import ProfkitError

MAGIC = b"DOTNET_IPC_V1\x00"
HEADER = struct.Struct("<14sHBBH")
COMMAND_SET_EVENTPIPE = 0x02
COMMAND_SET_SERVER = 0xFF
STOP_TRACING = 0x01
COLLECT_TRACING = 0x02
REPLY_OK = 0x00
REPLY_ERROR = 0xFF
FORMAT_NETTRACE = 1
#: replies larger than this are not the protocol's (an OK carries 8 bytes, an error 4)
MAX_REPLY = 4096

#: HRESULTs of the diagnostics server (ds-protocol.h), in words a user can act on
ERRORS = {
    0x80131384: "the runtime could not decode profkit's request (bad encoding)",
    0x80131385: "the runtime does not know this command (too old a runtime?)",
    0x80131386: "the runtime does not speak this protocol version",
    0x80131515: "the runtime does not support this request",
    0x80004005: "the runtime failed to start the session",
    0x8013135B: "the runtime is not ready yet (still starting)",
    0x80131371: "the runtime is not initialised yet",
    0x80070057: "the runtime rejected the session's configuration (invalid argument)",
    0x8007000E: "the runtime is out of memory for a session",
}


class DiagnosticsError(ProfkitError):
    """The target's diagnostics port is missing, refused, or answered with an error."""


@record(frozen=True)
class Provider:
    """One EventPipe provider of a session: name, keywords, level (5 = verbose), filter."""

    name: str
    keywords: int
    level: int = 5
    filter: str = ""


def _string(text: str) -> bytes:
    """The protocol's string: uint32 length in UTF-16 units (with the NUL), then UTF-16LE;
    the empty string is length 0 and no bytes."""
    if not text:
        return struct.pack("<I", 0)
    data = (text + "\x00").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


def message(command_set: int, command: int, payload: bytes = b"") -> bytes:
    """One request: the header (its size counts itself) and the payload."""
    size = HEADER.size + len(payload)
    if size > 0xFFFF:
        raise DiagnosticsError(f"request of {size} bytes exceeds the protocol's 65535")
    return HEADER.pack(MAGIC, size, command_set, command, 0) + payload


def collect_tracing(providers: Sequence[Provider], buffer_mb: int = 256) -> bytes:
    """``CollectTracing``: circular buffer size in MB, nettrace format, the providers."""
    body = struct.pack("<III", buffer_mb, FORMAT_NETTRACE, len(providers))
    for p in providers:
        body += struct.pack("<QI", p.keywords, p.level) + _string(p.name) + _string(p.filter)
    return message(COMMAND_SET_EVENTPIPE, COLLECT_TRACING, body)


def stop_tracing(session_id: int) -> bytes:
    return message(COMMAND_SET_EVENTPIPE, STOP_TRACING, struct.pack("<Q", session_id))


def _recv_exact(sock: socket.socket, n: int, what: str) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise DiagnosticsError(f"the runtime closed the diagnostics connection during {what}")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_reply(sock: socket.socket, what: str) -> bytes:
    """The payload of an OK reply; an error reply or a malformed one is a DiagnosticsError."""
    head = _recv_exact(sock, HEADER.size, what)
    magic, size, command_set, command, _ = HEADER.unpack(head)
    if magic != MAGIC or not HEADER.size <= size <= MAX_REPLY or command_set != COMMAND_SET_SERVER:
        raise DiagnosticsError(f"the runtime's reply to {what} is not of the IPC protocol")
    payload = _recv_exact(sock, size - HEADER.size, what)
    if command == REPLY_OK:
        return payload
    if command == REPLY_ERROR and len(payload) >= 4:
        code = struct.unpack_from("<I", payload)[0]
        said = ERRORS.get(code, "the runtime refused the request")
        raise DiagnosticsError(f"{what}: {said} (HRESULT 0x{code:08X})")
    raise DiagnosticsError(f"the runtime's reply to {what} is not of the IPC protocol")


def target_tmpdir(pid: int) -> str:
    """The target's ``TMPDIR`` (where its runtime made the socket): its environment when
    it can be read, else ``/tmp`` as the runtime's default."""
    env = read_environ(pid)
    return env.get("TMPDIR") or "/tmp"


def read_environ(pid: int) -> dict[str, str]:
    """The target's start-up environment (``/proc/PID/environ``), empty when not readable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return {}
    out: dict[str, str] = {}
    for item in raw.split(b"\x00"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def find_socket(pid: int) -> str | None:
    """The diagnostics socket of ``pid``, or None; the newest if several (a reused pid).

    Looked for in the target's own ``TMPDIR`` seen from here (``/proc/PID/root``: a target in
    another mount namespace, such as a container, has its own ``/tmp``) and then plainly.
    """
    tmp = target_tmpdir(pid)
    pattern = re.compile(rf"dotnet-diagnostic-{pid}-(\d+)-socket$")
    found: list[tuple[int, str]] = []
    for base in (f"/proc/{pid}/root{tmp}", tmp):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            m = pattern.match(name)
            if m:
                found.append((int(m.group(1)), os.path.join(base, name)))
        if found:
            break
    start = _start_ticks(pid)
    if start is not None:  # a socket left by a dead process whose pid was reused: not this one
        found = [f for f in found if f[0] == start]
    return max(found)[1] if found else None


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (``/proc/PID/stat``, field 22):
    the key CoreCLR puts in its socket's name to tell a reused pid apart; None if unread."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def connect(path: str, timeout: float = 5.0) -> socket.socket:
    """A connection to the diagnostics socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        raise DiagnosticsError(f"cannot connect to the diagnostics port {path}: {exc}") from None
    return sock


def start_session(path: str, providers: Sequence[Provider]) -> tuple[socket.socket, int]:
    """Send ``CollectTracing``; the open connection (the stream follows) and the session id."""
    sock = connect(path)
    try:
        sock.sendall(collect_tracing(providers))
        payload = read_reply(sock, "starting the EventPipe session")
    except OSError as exc:
        sock.close()
        raise DiagnosticsError(f"starting the EventPipe session: {exc}") from None
    except DiagnosticsError:
        sock.close()
        raise
    if len(payload) < 8:
        sock.close()
        raise DiagnosticsError("the runtime's reply to starting the session has no session id")
    sock.settimeout(None)
    return sock, struct.unpack_from("<Q", payload)[0]


def stop_session(path: str, session_id: int) -> None:
    """Send ``StopTracing`` on a new connection; the session's stream then ends (after the
    rundown). A target that is gone already is not an error: its stream has ended too."""
    try:
        sock = connect(path, timeout=10.0)
    except DiagnosticsError:
        return
    with sock:
        try:
            sock.sendall(stop_tracing(session_id))
            read_reply(sock, "stopping the EventPipe session")
        except (OSError, DiagnosticsError):
            return
