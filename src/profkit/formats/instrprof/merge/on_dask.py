"""Merging past one machine: leaves and a tree reduction of partial merges on Dask.

The same partial results ``merge -j`` sends between processes (:class:`ShareResult`:
summed counter arrays per raw-file shape, merged records of everything else, each
tagged with the index of the first input it holds) are made by leaf tasks over batches
of paths and combined pairwise as they complete. Combining is exact and order-free:
shapes add up, record segments are kept in input order and coalesced only where no
shape starts between them, so the final replay equals a serial merge in input order
(byte-identical output, tested).

Memory: a leaf reads one file at a time; a partial result is the size of one merged
profile, whatever the number of inputs; the client holds the list of paths (batches are
submitted as earlier ones finish, never all at once) and at most a few partials.
dask.distributed retries a leaf or a combination whose worker died (they are pure
functions of file paths), and the caller writes the output only once everything is
merged. Requires the optional ``dask`` extra (``pip install 'profkit[dask]'``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from profkit.errors import ProfkitError
from profkit.formats.instrprof.merge.accumulator import (
    MAX_TRACE_LENGTH,
    TRACE_RESERVOIR_SIZE,
    KindMismatchError,
    ProfileMerger,
)
from profkit.formats.instrprof.merge.files import (
    MergeInput,
    MergeOutcome,
    ShareResult,
    merge_share,
    replay,
)

if TYPE_CHECKING:
    from profkit.formats.instrprof.correlate import Correlation

#: Inputs per leaf task: large enough that task overhead (~1 ms) is small against
#: reading the files, small enough that retries and progress are fine-grained.
BATCH = 64
#: Leaves in flight per worker: keeps every worker busy without queueing 10^5 paths.
IN_FLIGHT_PER_WORKER = 4

INSTALL_HINT = "--dask needs dask.distributed: pip install 'profkit[dask]'"


class DaskUnavailableError(ProfkitError):
    """dask.distributed is not installed."""


def combine(
    a: ShareResult,
    b: ShareResult,
    traces: tuple[int, int] = (TRACE_RESERVOIR_SIZE, MAX_TRACE_LENGTH),
) -> ShareResult:
    """One partial result holding the inputs of both (either order: inputs are indexed)."""
    warnings = a.warnings + b.warnings
    shapes: dict[bytes, tuple[int, Any]] = {}
    extra: list[tuple[int, Any]] = []
    for index, acc in sorted(a.shapes + b.shapes, key=lambda item: item[0]):
        found = shapes.get(acc.shape.key)
        if found is None:
            shapes[acc.shape.key] = (index, acc)
        elif found[1].shape.parts == acc.shape.parts:
            found[1].combine(acc, warnings.append)
        else:  # a fingerprint collision: keep both, as replay does
            extra.append((index, acc))
    starts = sorted(i for i, _ in [*shapes.values(), *extra])
    segments: list[tuple[int, Any, int]] = []
    for index, state, inputs in sorted(a.segments + b.segments, key=lambda s: s[0]):
        if segments and not _shape_starts_between(starts, segments[-1][0], index):
            first, previous, count = segments[-1]
            merger = ProfileMerger(trace_reservoir_size=traces[0], max_trace_length=traces[1])
            try:
                merger.add_state(previous)
                merger.add_state(state)
            except KindMismatchError:  # left apart: the final replay reports it per input
                segments.append((index, state, inputs))
                continue
            segments[-1] = (first, merger.state(), count + inputs)
        else:
            segments.append((index, state, inputs))
    return ShareResult(
        [*shapes.values(), *extra],
        segments,
        a.merged + b.merged,
        sorted(a.failures + b.failures, key=lambda f: f[0]),
        warnings,
        a.versions | b.versions,
    )


def _shape_starts_between(starts: list[int], low: int, high: int) -> bool:
    from bisect import bisect_right

    i = bisect_right(starts, low)
    return i < len(starts) and starts[i] < high


def _leaf(
    batch: Sequence[tuple[int, MergeInput]], traces: tuple[int, int], binary: Correlation | None
) -> ShareResult:
    return merge_share(batch, None, traces, binary)


class Connection:
    """A dask.distributed client, and the local cluster it owns (if any)."""

    def __init__(self, client: Any, cluster: Any = None) -> None:
        self.client = client
        self.cluster = cluster

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def connect(where: str, workers: int) -> Connection:
    """A LocalCluster of ``workers`` processes for ``local``, else the scheduler at
    ``where`` (``tcp://HOST:PORT``)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise DaskUnavailableError(INSTALL_HINT) from None
    if where == "local":
        cluster = LocalCluster(
            n_workers=max(1, workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=50,
        )
        return Connection(Client(cluster), cluster)
    try:
        return Connection(Client(where, timeout="20s"))
    except (OSError, TimeoutError) as exc:
        raise ProfkitError(f"--dask {where}: cannot reach the scheduler: {exc}") from None


def merge_on_dask(
    inputs: Sequence[MergeInput],
    client: Any,
    *,
    sparse: bool = False,
    progress: Callable[[int], None] | None = None,
    trace_reservoir_size: int = TRACE_RESERVOIR_SIZE,
    max_trace_length: int = MAX_TRACE_LENGTH,
    batch: int = BATCH,
    binary: Correlation | None = None,
) -> MergeOutcome:
    """Merge ``inputs`` on the cluster behind ``client``; failures are collected.

    The result equals ``merge_files(inputs, jobs=1)`` (a serial merge in input order).
    """
    from distributed import as_completed

    traces = (trace_reservoir_size, max_trace_length)
    indexed = list(enumerate(inputs))
    batches = [indexed[i : i + batch] for i in range(0, len(indexed), batch)]
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    limit = workers * IN_FLIGHT_PER_WORKER
    pending = iter(batches)
    running = as_completed()
    for _ in range(min(limit, len(batches))):
        running.add(client.submit(_leaf, next(pending), traces, binary, pure=False))
    done_inputs = 0
    partial: Any = None  # a finished future waiting for a partner
    for future in running:
        if future.key.startswith("_leaf"):
            done_inputs += batch
            if progress is not None:
                progress(min(done_inputs, len(inputs)))
            nxt = next(pending, None)
            if nxt is not None:
                running.add(client.submit(_leaf, nxt, traces, binary, pure=False))
        if partial is None:
            partial = future
            if running.is_empty():
                break
            continue
        running.add(client.submit(combine, partial, future, traces, pure=False))
        partial = None
    # (no inputs at all: an empty result)
    final_result = ShareResult([], [], 0, [], [], set()) if partial is None else partial.result()
    if progress is not None:
        progress(len(inputs))
    warnings: list[str] = []
    final, merged, failures = replay([final_result], traces, warnings)
    return MergeOutcome(
        profile=final.result(sparse=sparse),
        merged=merged,
        failures=[(path, message) for _, path, message in failures],
        warnings=warnings,
        input_versions=final_result.versions,
    )
