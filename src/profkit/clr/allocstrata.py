"""Post-stratification of the native allocation samples: each stratum's samples scaled to its exact total.

The native profiler (``csrc/alloc.c``) counts every object exactly in its stratum, (type,
power-of-two size class), and samples objects by bytes; each sample's site lies in one
stratum. The sampled weights of a stratum are unbiased for its total, which is known: so
each is scaled by ``exact / sampled`` of its stratum (a ratio estimator: still unbiased as
the samples grow, its error now only the split of a stratum between the sites sharing it).
Two methods allocating different types or sizes no longer borrow each other's sampling
noise; two allocating the same type and size class still split that stratum by their
samples (a relative error of ~sqrt(mean / bytes), as before).

A stratum with exact bytes but no sample has no stack to give them to: they are
*unattributed*, kept per thread and type so the totals stay exact (the memory profile shows
them as an ``[unattributed]`` frame under the thread's root). The scaled weights are whole
bytes, apportioned by largest remainder so each stratum's sites add up to its total exactly.
"""

from __future__ import annotations

from profkit._record import field, record
from profkit.clr.allocrecords import OTHER_CLASS, AllocResult

#: how the allocated view is estimated, as the metadata says it
ESTIMATOR = "post-stratified by (type, size class)"
SAMPLED_ONLY = "sampled by bytes (no strata in the result)"


@record
class Stratified:
    """Each site's bytes after post-stratification, and what no sample reached."""

    weights: list[int] = field(default_factory=list)  #: per site, as :attr:`AllocResult.sites`
    #: (thread, type index) -> [objects, bytes] of the strata no sample reached
    unattributed: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    strata: int = 0  #: distinct (type, size class), over all threads
    unsampled: int = 0  #: those without a sample
    #: type index (-1 unnamed, -2 "other") -> [objects, bytes], exact
    by_type: dict[int, list[int]] = field(default_factory=dict)
    by_thread: dict[int, int] = field(default_factory=dict)  #: thread -> bytes, exact
    estimator: str = ESTIMATOR


def _kind(stratum: tuple[int, int]) -> int:
    """A stratum's type as :attr:`Stratified.by_type` keys it: -2 for the "other" stratum."""
    return -2 if stratum[1] == OTHER_CLASS else stratum[0]


def apportion(total: int, weights: list[int]) -> list[int]:
    """``total`` split in whole numbers proportional to ``weights`` (largest remainder; ties
    to the earlier), adding up to ``total`` exactly; ``weights`` must not sum to 0."""
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def poststratify(alloc: AllocResult) -> Stratified:
    """The post-stratified weights of ``alloc``'s sites (unscaled when it has no strata)."""
    out = Stratified(weights=[s.bytes for s in alloc.sites])
    if not alloc.strata:
        out.estimator = SAMPLED_ONLY
        return out
    exact: dict[tuple[int, int], int] = {}
    per_thread: dict[tuple[int, int], dict[int, list[int]]] = {}
    for st in alloc.strata:
        key = st.stratum
        exact[key] = exact.get(key, 0) + st.bytes
        row = per_thread.setdefault(key, {}).setdefault(st.tid, [0, 0])
        row[0] += st.objects
        row[1] += st.bytes
        counts = out.by_type.setdefault(_kind(key), [0, 0])
        counts[0] += st.objects
        counts[1] += st.bytes
        out.by_thread[st.tid] = out.by_thread.get(st.tid, 0) + st.bytes
    sites: dict[tuple[int, int], list[int]] = {}
    for i, site in enumerate(alloc.sites):
        sites.setdefault(site.stratum, []).append(i)
    out.strata = len(exact)
    for key, total in exact.items():
        members = sites.get(key, [])
        sampled = [alloc.sites[i].bytes for i in members]
        if sum(sampled) > 0:
            for i, share in zip(members, apportion(total, sampled), strict=True):
                out.weights[i] = share
            continue
        out.unsampled += 1
        for i in members:  # samples of weight 0 (objects of no size): nothing to scale
            out.weights[i] = 0
        for tid, (objects, size) in per_thread[key].items():
            row = out.unattributed.setdefault((tid, _kind(key)), [0, 0])
            row[0] += objects
            row[1] += size
    return out
