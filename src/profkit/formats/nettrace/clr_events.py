"""Payloads of the runtime's own events that a sampling profiler needs, by known layout.

CoreCLR 3.1 writes the metadata of its native events with neither name nor field list,
so their payloads are read here by the layouts of the runtime's event manifest
(dotnet/runtime ``src/coreclr/vm/ClrEtwAll.man``); later versions append fields, so
each layout lists every version's fields in order and a payload is read as far as its
version goes. A payload too short for its own version is not decoded (``None``): one
odd event must not cost a profile.

Decoded: the sample profiler's ThreadSample; method load/unload and rundown (verbose,
with names); module load/unload and rundown; thread creation; GC start/end;
GCAllocationTick (V2–V4).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from profkit.formats.nettrace.model import Event, EventMetadata, Trace

SAMPLE_PROFILER = "Microsoft-DotNETCore-SampleProfiler"
RUNTIME = "Microsoft-Windows-DotNETRuntime"
RUNDOWN = "Microsoft-Windows-DotNETRuntimeRundown"

#: ThreadSample's payload: what the thread was doing when sampled
SAMPLE_ERROR, SAMPLE_EXTERNAL, SAMPLE_MANAGED = 0, 1, 2

# (provider, event id) -> name, for metadata that came without one (3.1)
NAMES = {
    (SAMPLE_PROFILER, 0): "ThreadSample",
    (RUNTIME, 1): "GCStart",
    (RUNTIME, 2): "GCEnd",
    (RUNTIME, 3): "GCRestartEEEnd",
    (RUNTIME, 4): "GCHeapStats",
    (RUNTIME, 7): "GCRestartEEBegin",
    (RUNTIME, 8): "GCSuspendEEEnd",
    (RUNTIME, 9): "GCSuspendEEBegin",
    (RUNTIME, 10): "GCAllocationTick",
    (RUNTIME, 35): "GCTriggered",
    (RUNTIME, 85): "ThreadCreated",
    (RUNTIME, 86): "ThreadTerminated",
    (RUNTIME, 141): "MethodLoad",
    (RUNTIME, 142): "MethodUnload",
    (RUNTIME, 143): "MethodLoadVerbose",
    (RUNTIME, 144): "MethodUnloadVerbose",
    (RUNTIME, 145): "MethodJittingStarted",
    (RUNTIME, 151): "DomainModuleLoad",
    (RUNTIME, 152): "ModuleLoad",
    (RUNTIME, 153): "ModuleUnload",
    (RUNTIME, 154): "AssemblyLoad",
    (RUNTIME, 155): "AssemblyUnload",
    (RUNTIME, 187): "RuntimeInformationStart",
    (RUNDOWN, 141): "MethodDCStart",
    (RUNDOWN, 142): "MethodDCEnd",
    (RUNDOWN, 143): "MethodDCStartVerbose",
    (RUNDOWN, 144): "MethodDCEndVerbose",
    (RUNDOWN, 145): "DCStartComplete",
    (RUNDOWN, 146): "DCEndComplete",
    (RUNDOWN, 147): "DCStartInit",
    (RUNDOWN, 148): "DCEndInit",
    (RUNDOWN, 149): "MethodDCStartILToNativeMap",
    (RUNDOWN, 150): "MethodDCEndILToNativeMap",
    (RUNDOWN, 151): "DomainModuleDCStart",
    (RUNDOWN, 152): "DomainModuleDCEnd",
    (RUNDOWN, 153): "ModuleDCStart",
    (RUNDOWN, 154): "ModuleDCEnd",
    (RUNDOWN, 155): "AssemblyDCStart",
    (RUNDOWN, 156): "AssemblyDCEnd",
    (RUNDOWN, 157): "AppDomainDCStart",
    (RUNDOWN, 158): "AppDomainDCEnd",
    (RUNDOWN, 187): "RuntimeInformationDCStart",
}


def event_name(metadata: EventMetadata) -> str:
    """The event's name: the metadata's own, else the manifest's, else ``EventID(N)``."""
    if metadata.name:
        return metadata.name
    return NAMES.get((metadata.provider, metadata.event_id), f"EventID({metadata.event_id})")


@dataclass(frozen=True, slots=True)
class MethodEvent:
    """A method's code range and names (MethodLoad*/MethodUnload*/MethodDC*)."""

    kind: str  #: "load", "unload", "dcstart" or "dcend"
    method_id: int
    module_id: int
    start: int
    size: int
    token: int
    flags: int
    namespace: str = ""  #: the declaring type, ``Namespace.Type`` (verbose events only)
    name: str = ""
    signature: str = ""
    rejit_id: int = 0


@dataclass(frozen=True, slots=True)
class ModuleEvent:
    """A module's id and files (ModuleLoad/ModuleUnload/ModuleDC*)."""

    kind: str  #: "load", "unload", "dcstart" or "dcend"
    module_id: int
    assembly_id: int
    flags: int
    il_path: str
    native_path: str


@dataclass(frozen=True, slots=True)
class ThreadCreated:
    """A managed thread and the OS thread under it."""

    managed_thread_id: int
    app_domain_id: int
    flags: int
    managed_thread_index: int
    os_thread_id: int


@dataclass(frozen=True, slots=True)
class GCStart:
    count: int
    depth: int
    reason: int
    type: int


@dataclass(frozen=True, slots=True)
class GCEnd:
    count: int
    depth: int


@dataclass(frozen=True, slots=True)
class AllocationTick:
    """About every 100 KB allocated: how much, which kind (0 small, 1 large), the last type."""

    amount: int
    kind: int
    type_id: int = 0
    type_name: str = ""
    heap_index: int = 0
    address: int = 0
    object_size: int = 0


_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")


class _Payload:
    """Reads a payload field by field; ``None`` from every read once it ran out."""

    __slots__ = ("data", "ok", "pointer", "pos")

    def __init__(self, data: bytes, pointer_size: int) -> None:
        self.data = data
        self.pos = 0
        self.ok = True
        self.pointer = _U64 if pointer_size == 8 else _U32

    def _fixed(self, layout: struct.Struct) -> int:
        size = layout.size
        if not self.ok or self.pos + size > len(self.data):
            self.ok = False
            return 0
        value: int = layout.unpack_from(self.data, self.pos)[0]
        self.pos += size
        return value

    def u16(self) -> int:
        return self._fixed(_U16)

    def u32(self) -> int:
        return self._fixed(_U32)

    def u64(self) -> int:
        return self._fixed(_U64)

    def ptr(self) -> int:
        return self._fixed(self.pointer)

    def text(self) -> str:
        if not self.ok:
            return ""
        data, pos = self.data, self.pos
        stop = pos
        while True:
            stop = data.find(b"\x00\x00", stop)
            if stop < 0:
                self.ok = False
                return ""
            if (stop - pos) % 2 == 0:
                break
            stop += 1
        self.pos = stop + 2
        return bytes(data[pos:stop]).decode("utf-16-le", errors="replace")


_METHOD_KINDS = {
    (RUNTIME, 141): "load",
    (RUNTIME, 143): "load",
    (RUNTIME, 142): "unload",
    (RUNTIME, 144): "unload",
    (RUNDOWN, 141): "dcstart",
    (RUNDOWN, 143): "dcstart",
    (RUNDOWN, 142): "dcend",
    (RUNDOWN, 144): "dcend",
}
_MODULE_KINDS = {
    (RUNTIME, 152): "load",
    (RUNTIME, 153): "unload",
    (RUNDOWN, 153): "dcstart",
    (RUNDOWN, 154): "dcend",
}


def thread_sample(payload: bytes) -> int | None:
    """A ThreadSample's kind (:data:`SAMPLE_MANAGED`, :data:`SAMPLE_EXTERNAL`, ...)."""
    if len(payload) < 4:
        return None
    kind: int = struct.unpack_from("<I", payload)[0]
    return kind


def method_event(metadata: EventMetadata, payload: bytes, pointer_size: int) -> MethodEvent | None:
    """A method load/unload/rundown event (verbose or not), or ``None``."""
    key = (metadata.provider, metadata.event_id)
    kind = _METHOD_KINDS.get(key)
    if kind is None:
        return None
    read = _Payload(payload, pointer_size)
    method_id, module_id, start = read.u64(), read.u64(), read.u64()
    size, token, flags = read.u32(), read.u32(), read.u32()
    names = ("", "", "")
    if metadata.event_id in (143, 144):
        names = (read.text(), read.text(), read.text())
    if not read.ok:
        return None
    rejit = 0
    if metadata.version >= 2:
        read.u16()  # ClrInstanceID (V1)
        rejit = read.u64()
        if not read.ok:
            return None
    return MethodEvent(kind, method_id, module_id, start, size, token, flags, *names, rejit)


def module_event(metadata: EventMetadata, payload: bytes, pointer_size: int) -> ModuleEvent | None:
    """A module load/unload/rundown event, or ``None``."""
    kind = _MODULE_KINDS.get((metadata.provider, metadata.event_id))
    if kind is None:
        return None
    read = _Payload(payload, pointer_size)
    module_id, assembly_id, flags = read.u64(), read.u64(), read.u32()
    read.u32()  # Reserved1
    il_path, native_path = read.text(), read.text()
    if not read.ok:
        return None
    return ModuleEvent(kind, module_id, assembly_id, flags, il_path, native_path)


def thread_created(
    metadata: EventMetadata, payload: bytes, pointer_size: int
) -> ThreadCreated | None:
    """ThreadCreated (runtime event 85), or ``None``."""
    if (metadata.provider, metadata.event_id) != (RUNTIME, 85):
        return None
    read = _Payload(payload, pointer_size)
    record = ThreadCreated(read.ptr(), read.ptr(), read.u32(), read.u32(), read.u32())
    return record if read.ok else None


def gc_start(metadata: EventMetadata, payload: bytes) -> GCStart | None:
    """GCStart: V0 (count, reason), V1 and V2 (count, depth, reason, type); else ``None``."""
    if (metadata.provider, metadata.event_id) != (RUNTIME, 1):
        return None
    read = _Payload(payload, 8)
    if metadata.version == 0:
        count, reason = read.u32(), read.u32()
        return GCStart(count, 0, reason, 0) if read.ok else None
    record = GCStart(read.u32(), read.u32(), read.u32(), read.u32())
    return record if read.ok else None


def gc_end(metadata: EventMetadata, payload: bytes) -> GCEnd | None:
    """GCEnd: V0 (count, uint16 depth), V1 (count, depth); else ``None``."""
    if (metadata.provider, metadata.event_id) != (RUNTIME, 2):
        return None
    read = _Payload(payload, 8)
    record = GCEnd(read.u32(), read.u16() if metadata.version == 0 else read.u32())
    return record if read.ok else None


def allocation_tick(
    metadata: EventMetadata, payload: bytes, pointer_size: int
) -> AllocationTick | None:
    """GCAllocationTick: V1 (amount, kind), V2 (+64-bit amount, type, heap), V3 (+address),
    V4 (+object size); ``None`` if not one."""
    if (metadata.provider, metadata.event_id) != (RUNTIME, 10):
        return None
    read = _Payload(payload, pointer_size)
    amount, kind = read.u32(), read.u32()
    if metadata.version < 2:
        return AllocationTick(amount, kind) if read.ok else None
    read.u16()  # ClrInstanceID
    amount = read.u64()
    type_id, type_name, heap = read.ptr(), read.text(), read.u32()
    address = read.ptr() if metadata.version >= 3 else 0
    size = read.u64() if metadata.version >= 4 else 0
    if not read.ok:
        return None
    return AllocationTick(amount, kind, type_id, type_name, heap, address, size)


def decode(trace: Trace, event: Event) -> object | None:
    """Whichever of the records above ``event`` is, or ``None``."""
    metadata = trace.metadata[event.metadata_id]
    payload = event.payload
    size = trace.header.pointer_size
    key = (metadata.provider, metadata.event_id)
    if key in _METHOD_KINDS:
        return method_event(metadata, payload, size)
    if key in _MODULE_KINDS:
        return module_event(metadata, payload, size)
    if key == (RUNTIME, 85):
        return thread_created(metadata, payload, size)
    if key == (RUNTIME, 1):
        return gc_start(metadata, payload)
    if key == (RUNTIME, 2):
        return gc_end(metadata, payload)
    if key == (RUNTIME, 10):
        return allocation_tick(metadata, payload, size)
    return None
