"""Loss accounting from sequence numbers: gaps, reordering, duplicates, restarts, bounds."""

from __future__ import annotations

from profkit.monitor.accounting import MAX_JUMP, REORDER_WINDOW, SenderStats


def _feed(seqs: list[int], dropped: list[int] | None = None) -> SenderStats:
    s = SenderStats("h/1")
    for i, seq in enumerate(seqs):
        s.accept(seq, dropped[i] if dropped else 0, 1, 0.0)
    return s


def test_in_order_no_loss() -> None:
    s = _feed(list(range(100)))
    assert (s.received, s.lost, s.reordered, s.duplicates) == (100, 0, 0, 0)


def test_gaps_are_lost() -> None:
    s = _feed([0, 1, 5, 6, 10])
    assert s.lost == 3 + 3 and s.received == 5


def test_late_arrival_is_not_loss() -> None:
    s = _feed([0, 2, 3, 1, 4])
    assert (s.lost, s.reordered, s.received) == (0, 1, 5)


def test_first_datagram_missed() -> None:
    s = _feed([3, 4])
    assert s.lost == 3
    s.accept(0, 0, 1, 0.0)
    assert s.lost == 2 and s.reordered == 1


def test_duplicates_ignored() -> None:
    s = _feed([0, 1, 1, 2, 0])
    assert (s.duplicates, s.received, s.lost) == (2, 3, 0)


def test_restart_is_not_loss_and_keeps_dropped() -> None:
    seqs = [*list(range(REORDER_WINDOW + 10)), 0, 1, 2]
    dropped = [5] * (REORDER_WINDOW + 10) + [0, 1, 1]
    s = _feed(seqs, dropped)
    assert (s.restarts, s.lost, s.duplicates) == (1, 0, 0)
    assert s.dropped == 6  # 5 from the first run + 1 from the current one


def test_reordered_dropped_field_does_not_go_backwards() -> None:
    s = _feed([0, 2, 1], [0, 7, 3])
    assert s.dropped == 7


def test_largest_plausible_gap_uses_bounded_memory() -> None:
    s = _feed([0, MAX_JUMP + 1])
    assert s.lost == MAX_JUMP
    assert len(s._missing) <= REORDER_WINDOW
    s.accept(MAX_JUMP, 0, 1, 0.0)
    assert s.lost == MAX_JUMP - 1


def test_garbage_sequence_numbers_are_refused_not_counted_as_loss() -> None:
    # issue #17: a datagram with a garbage seq made "lost" astronomic
    s = _feed([0, 1, 10**15, 2, 18446744073709551615, 3])
    assert (s.lost, s.implausible, s.received, s.next_seq) == (0, 2, 4, 4)


def test_first_datagram_far_into_the_run_sets_the_baseline() -> None:
    s = _feed([10**12, 10**12 + 1, 10**12 + 3])
    assert (s.lost, s.received, s.implausible) == (1, 3, 0)


def test_missing_set_stays_bounded_over_many_gaps() -> None:
    s = _feed(list(range(0, 40 * REORDER_WINDOW, 3)))
    assert len(s._missing) <= REORDER_WINDOW
