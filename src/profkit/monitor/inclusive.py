"""Inclusive (total) time that counts a recursive function once, from close lines alone.

cProfile's ``cumtime`` adds a call's duration only when no call of the same function is
still open below it on the stack. The monitor sees only close lines (``Leave: f,
Duration: …`` with four spaces per depth; Enter lines are never parsed, which is what
keeps it at a million lines a second), so it learns that a call was nested in another
call of the same name only when the outer one closes — after the inner ones were
already added. The correction is made then: the outer close adds its duration *minus*
what its own nested calls of that name had added, so the sum ends as cumtime's.

What was added, and under which still-open frames, is kept per sender and per name as a
short list of records ``[k, added, t, k, added, t, ...]``:

* ``t`` is the sender's close sequence number when the record was made;
* ``added`` is what its calls added to the total;
* the record's calls lie under the frames still open at depths ``0 .. k-1``, so a later
  close of the same name at depth ``d`` contains them exactly when ``d < k``.

``k`` goes stale as frames close; it is brought up to date lazily from ``last``, the
sequence number of each depth's latest close: a frame at depth ``c`` that closed after
``t`` (``last[c] > t``) lowers a record's ``k`` to ``c``. For a stream with no lost
lines that test is monotonic in ``c`` (a frame closes only after every frame under
it), so a record is inside the closing frame at depth ``d`` iff ``k > d and t >
last[d]`` (one comparison), its current ``k`` is a walk up ``last``, and the
records of one name have non-decreasing ``k``: records with the same ``k`` merge, so a
list is never longer than the stack is deep. A lost datagram can only mis-nest the few
calls it straddles; every list is capped all the same.

``last`` is the sender's ``array('q')`` of ``MAX_DEPTH + 2`` depths plus one last slot,
the sequence counter. ``_closes.c`` does exactly this, in C, on the same objects.
"""

from __future__ import annotations

from array import array

#: Most records kept for one name and sender (three ints each); past it the oldest goes
#: (only a stream with lost lines gets near it: records are at most one per depth).
MAX_RECORDS = 64


def new_last(depths: int) -> array[int]:
    """A sender's per-depth last-close sequence numbers, and the counter in the last slot."""
    return array("q", bytes(8 * (depths + 1)))


def counted(
    key: int, depth: int, ns: int, since: int, last: array[int], pending: dict[int, list[int]]
) -> int:
    """What a close of function ``key`` at ``depth`` lasting ``ns`` adds to its total.

    ``ns`` minus the time its nested calls of the same function already added (see the
    module doc). The caller has noted this close first (every close, of any function,
    waits too): ``since`` is ``last[depth]`` before, and ``last[depth]`` is now the new
    sequence number, also in ``last[-1]``.
    """
    now = last[depth]
    records = pending.get(key)
    if records is None:
        if depth:
            pending[key] = [depth, ns, now]
        return ns
    nested = 0
    while records and records[-3] > depth and records[-1] > since:
        nested += records[-2]  # a call of this function inside this one: counted again now
        del records[-3:]
    if depth == 0:  # nothing is open above: no later close can contain this one
        records.clear()
        return ns - nested
    if records and records[-3] >= depth and records[-1] > last[depth - 1]:
        # the last record sits under the same open frames as this call: one record (its
        # t stays: no frame above depth closed since it, so the tests read the same)
        records[-3] = depth
        records[-2] += ns
        return ns - nested
    if records:
        _compact(records, last)
    records += (depth, ns, now)
    if len(records) > 3 * MAX_RECORDS:
        del records[:3]
    return ns - nested


def _compact(records: list[int], last: array[int]) -> None:
    """Bring the last record's ``k`` up to date and merge the records that share it."""
    k = current_k(records[-3], records[-1], last)
    if k == 0:  # under no open frame: no later close can contain any of them
        records.clear()
        return
    records[-3] = k
    while len(records) >= 6 and records[-6] >= k and records[-4] > last[k - 1]:
        records[-2] += records[-5]
        del records[-6:-3]


def current_k(k: int, t: int, last: array[int]) -> int:
    """The shallowest depth below ``k`` whose frame closed after ``t``, else ``k``.

    A walk up from ``k`` rather than a binary search: a record's ``k`` only goes down, and
    is stored back, so the steps are paid for by the depth it was made at.
    """
    while k and last[k - 1] > t:
        k -= 1
    return k
