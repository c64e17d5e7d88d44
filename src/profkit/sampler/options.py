"""What a sampler session is asked to do (:class:`SamplerOptions`) and what it did
(:class:`SamplerStats`): plain values shared by the loop, the recorder, the CLI and the
``run`` engine, kept apart so none of them imports the loop to name its options."""

from __future__ import annotations

from typing import Any

from profkit._record import record
from profkit.settings import SAMPLE_CLOCKS, SampleClock

#: The modes are the settings' sample clocks (one table for run, attach and top).
Mode = SampleClock
MODES: tuple[Mode, ...] = SAMPLE_CLOCKS


@record(frozen=True)
class SamplerOptions:
    """What to sample and how often."""

    rate: float = 1000.0  #: samples per second asked
    mode: Mode = "wall"
    duration: float | None = None  #: seconds; None: until the target exits or stop()
    follow_children: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1_000_000:
            raise ValueError(f"rate must be in (0, 1000000] Hz, not {self.rate}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")


@record
class SamplerStats:
    """What the loop did: samples asked vs delivered, and what each cost."""

    asked: int = 0  #: ticks the schedule asked for (elapsed * rate)
    ticks: int = 0  #: ticks done
    late: int = 0  #: ticks that started more than one interval late
    #: wall time of gaps between reads beyond one interval, where the reads were late
    #: (a busy machine): charged to the stacks seen at either end of each gap
    late_ns: int = 0
    unsampled_ns: int = 0  #: wall time of stalls (gaps over STALL_NS): in no weight
    busy_ns: int = 0  #: time spent sampling (not sleeping)
    elapsed_ns: int = 0

    @property
    def delivered_ratio(self) -> float:
        return self.ticks / self.asked if self.asked else 0.0

    @property
    def cost_us(self) -> float:
        """Mean sampler time per tick (every process and thread), in µs."""
        return self.busy_ns / self.ticks / 1000 if self.ticks else 0.0

    def busy_note(self) -> str:
        """What a user should know about the times when the reads were often late or
        the sampler stalled ('' when neither): the times are true, but part of them
        was charged across gaps nobody looked into, or left out."""
        parts = []
        elapsed = max(self.elapsed_ns, 1)
        if self.late_ns > 0.1 * elapsed:
            parts.append(
                f"the machine was busy: {self.late_ns / 1e9:.2f} s of {elapsed / 1e9:.2f} s "
                f"({100 * self.late_ns / elapsed:.0f} %) fell between late reads and was "
                "charged to the stacks seen on either side"
            )
        if self.unsampled_ns:
            parts.append(
                f"{self.unsampled_ns / 1e9:.2f} s not sampled (the sampler was stopped) "
                "and in no time shown"
            )
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "ticks": self.ticks,
            "late": self.late,
            "late_ns": self.late_ns,
            "unsampled_ns": self.unsampled_ns,
            "cost_us_per_tick": round(self.cost_us, 2),
            "elapsed_ns": self.elapsed_ns,
        }
