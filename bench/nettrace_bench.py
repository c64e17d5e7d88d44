"""Benchmark: the nettrace reader's speed on a long real session, beside the session.

Compiles ``tests/fixtures/nettrace/Spinner.cs`` (mcs), runs it on the CoreCLR that
profkit finds (dotnetcore2's 3.1 by default) for ``--seconds`` with start-up EventPipe
tracing of the sample profiler and the runtime's GC/loader/JIT/threading events plus
rundown (the fixtures' configuration, longer), then times, best of ``--repeat``:

* ``read_nettrace`` on the whole file (MB/s, events/s);
* ``NettraceParser.feed`` in 64 KB chunks, as a live diagnostics-port session arrives;
* the same read plus decoding every runtime event :mod:`clr_events` knows.

Each is printed beside the session's own duration (wall time of the traced process
and the span of the trace's timestamps): the issue's target is that converting takes
less time than the session did (ratio < 1). Run:
``python bench/nettrace_bench.py [--seconds 20] [--repeat 3] [--trace FILE]``
(``--trace`` times an existing file instead of making one).
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

from profkit.formats.nettrace import Event, NettraceParser, Trace, read_nettrace
from profkit.formats.nettrace import clr_events as ce

ROOT = Path(__file__).resolve().parents[1]
MAKER = ROOT / "tests" / "fixtures" / "nettrace" / "make_fixtures.py"


def _maker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_fixtures", MAKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_session(seconds: float, work: Path) -> tuple[bytes, float]:
    """A real trace of ``seconds`` of Spinner, and the traced process's wall time."""
    from profkit.clr.host import find_host

    maker = _maker()
    assembly = maker.build(work)
    env = {"COMPlus_EventPipeConfig": f"{maker.SAMPLER},{maker.RUNTIME}"}
    args = [str(int(seconds * 1000)), str(int(seconds * 50000))]
    start = time.perf_counter()
    written = maker.trace(find_host(None).path, assembly, env, args, work)
    return written.read_bytes(), time.perf_counter() - start


def _best(repeat: int, run) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _feed(data: bytes) -> int:
    parser = NettraceParser("live")
    count = 0
    for pos in range(0, len(data), 1 << 16):
        count += sum(isinstance(r, Event) for r in parser.feed(data[pos : pos + (1 << 16)]))
    parser.finish()
    return count


def _decode_all(data: bytes) -> int:
    trace = read_nettrace(data, "bench")
    return sum(ce.decode(trace, event) is not None for event in trace.events)


def _span(trace: Trace) -> float:
    stamps = [event.timestamp for event in trace.events]
    return (max(stamps) - min(stamps)) / trace.header.qpc_frequency if stamps else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace", type=Path, help="time this file instead of making one")
    options = parser.parse_args(argv)
    wall = None
    if options.trace:
        data = options.trace.read_bytes()
    else:
        with tempfile.TemporaryDirectory() as scratch:
            data, wall = make_session(options.seconds, Path(scratch))
    trace = read_nettrace(data, "bench")
    span = _span(trace)
    session = wall if wall is not None else span
    megabytes = len(data) / 1e6
    print(
        f"session: {megabytes:.2f} MB, {len(trace.events)} events, {len(trace.stacks)} stacks; "
        f"timestamps span {span:.2f} s" + (f", traced process ran {wall:.2f} s" if wall else "")
    )
    rows = (
        ("read_nettrace (whole)", lambda: read_nettrace(data, "bench")),
        ("NettraceParser.feed (64 KB chunks)", lambda: _feed(data)),
        ("read + clr_events.decode all", lambda: _decode_all(data)),
    )
    for label, run in rows:
        seconds = _best(options.repeat, run)
        print(
            f"{label:36s} {seconds:7.3f} s  {megabytes / seconds:6.2f} MB/s  "
            f"{len(trace.events) / seconds / 1e3:7.1f} k events/s  "
            f"{seconds / session:.3f} of the session's {session:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
