"""Post-stratification of a sampled allocation estimate: what
:meth:`ProfilerInfo.get_allocation_strata <profkit.api.info.ProfilerInfo.get_allocation_strata>`
returns, and how a profiler scales its samples' weights with it (docs/heap.md,
"Post-stratification").

The allocator hooks see every allocation's size, so each size class's bytes are known
exactly; only which stack allocated them is sampled. Here, not in :mod:`profkit.heap`,
because a profiler (``profilers/memory.py``) reads it through the API.
"""

from __future__ import annotations

from profkit._record import record

#: A stratum: (recorded always, size class); class k holds sizes in [2**k, 2**(k+1)), 0 and 1
#: in class 0. Allocations of ``exact_bytes`` or more are a stratum apart from the sampled
#: ones of the same class.
StratumKey = tuple[bool, int]


@record(frozen=True)
class Stratum:
    """One stratum's exact tally (every allocation the hooks saw in it) and its samples."""

    exact: bool
    size_class: int
    allocations: int
    bytes: int
    samples: int
    #: the samples' summed weights: the unstratified estimate of ``bytes``
    weight: float

    @property
    def factor(self) -> float | None:
        """What each of its samples' weights is multiplied by so they add up to ``bytes``
        (None when it has no sample: its bytes are unattributed)."""
        return self.bytes / self.weight if self.samples and self.weight > 0 else None


@record(frozen=True)
class Strata:
    """Post-stratification of the byte estimate (docs/heap.md).

    The hooks see every allocation's size, so each size class's bytes are known exactly;
    only which stack allocated them is sampled. Scaling each sample's weight by its stratum's
    :attr:`Stratum.factor` makes the weights of every stratum add up to its exact bytes (a
    ratio estimator per stratum: still unbiased, and sites that allocate in different size
    classes no longer share one class's sampling noise). A stratum with bytes and no sample
    has nobody to give them to: :attr:`unattributed_bytes`.
    """

    exact_bytes: int
    rows: tuple[Stratum, ...]

    def key(self, size: int) -> StratumKey:
        """The stratum of an allocation of ``size`` bytes."""
        return size >= self.exact_bytes, max(int(size), 1).bit_length() - 1

    def factors(self) -> dict[StratumKey, float]:
        """Per stratum with samples, the factor its samples' weights are multiplied by."""
        return {(r.exact, r.size_class): f for r in self.rows if (f := r.factor) is not None}

    @property
    def allocated_bytes(self) -> int:
        """Every byte the hooks saw allocated (exact)."""
        return sum(r.bytes for r in self.rows)

    @property
    def allocations(self) -> int:
        return sum(r.allocations for r in self.rows)

    @property
    def unattributed_bytes(self) -> int:
        """Bytes of strata in which no allocation was sampled."""
        return sum(r.bytes for r in self.rows if r.factor is None)

    @property
    def unattributed_allocations(self) -> int:
        return sum(r.allocations for r in self.rows if r.factor is None)

    def as_metadata(self) -> dict[str, object]:
        """JSON-ready: what a saved profile says of its scaling (``from_metadata`` reads it)."""
        return {
            "method": "post-stratified by size class",
            "exact_bytes": self.exact_bytes,
            "rows": [
                [r.exact, r.size_class, r.allocations, r.bytes, r.samples, r.weight]
                for r in self.rows
            ],
        }

    @classmethod
    def from_metadata(cls, data: dict[str, object]) -> Strata:
        rows = data.get("rows", [])
        assert isinstance(rows, list)
        exact = data.get("exact_bytes", 0)
        assert isinstance(exact, int)
        return cls(
            exact,
            tuple(
                Stratum(bool(e), int(c), int(n), int(b), int(k), float(w))
                for e, c, n, b, k, w in rows
            ),
        )
