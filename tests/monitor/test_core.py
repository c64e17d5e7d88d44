"""The monitor's state machine fed directly with datagrams (no sockets)."""

from __future__ import annotations

from profkit.monitor.core import Monitor
from profkit.monitor.functions import MAX_NAME, FunctionTable
from profkit.monitor.view import PlainView, prefixed, summary
from profkit.wire.udp import encode


class _Out:
    def __init__(self) -> None:
        self.text = ""
        self.writes = 0

    def write(self, s: str) -> int:
        self.text += s
        self.writes += 1
        return len(s)

    def flush(self) -> None:
        pass


LINES = [
    "Enter: myapp.main",
    "    Enter: myapp.work",
    "    Leave: myapp.work, Duration: 12.250 us",
    "    Yield: myapp.gen, Duration: 700 ns",
    "Leave: myapp.main, Duration: 1.5 ms",
]


def test_malformed_counted_and_ignored() -> None:
    m = Monitor()
    assert m.feed(b"junk") is None
    assert m.feed(b"PK1 a 1\xff 2\nx") is None
    assert m.malformed == 2 and m.sender_count == 0
    assert "malformed" in summary(m, 5)


def test_functions_from_leave_and_yield_durations() -> None:
    m = Monitor()
    m.feed(encode("h/1", 0, 0, LINES))
    m.feed(encode("h/1", 1, 0, LINES[2:3]))
    top = {row[0]: row[1:] for row in m.functions.top(10)}
    assert top == {
        "myapp.main": (1_487_050, 1_500_000, 1, 1_500_000),
        "myapp.work": (24_500, 24_500, 2, 12_250),
        "myapp.gen": (700, 700, 1, 700),
    }
    assert [row[0] for row in m.functions.top(1)] == ["myapp.main"]


def test_self_and_total_count_recursion_once_and_per_sender() -> None:
    m = Monitor()
    rec = [
        "        Leave: f, Duration: 10 ns",
        "    Leave: f, Duration: 30 ns",
        "Leave: f, Duration: 100 ns",
    ]
    m.feed(encode("a/1", 0, 0, rec[:1]))
    m.feed(encode("b/1", 0, 0, ["    Leave: g, Duration: 5 ns"]))  # other sender: own depths
    m.feed(encode("a/1", 1, 0, rec[1:]))
    top = {row[0]: row[1:3] for row in m.functions.top(5)}
    assert top == {"f": (100, 100), "g": (5, 5)}  # total as cumtime (#25)


def test_multiple_senders_prefix_lines_and_totals() -> None:
    m = Monitor()
    out = _Out()
    view = PlainView(out)  # type: ignore[arg-type]
    for sender, seq in (("a/1", 0), ("a/1", 1), ("b/2", 0), ("a/1", 3)):
        result = m.feed(encode(sender, seq, 0, ["Enter: x", "Enter: y"]))
        assert result is not None
        view.show(m, *result)
    view.tick(m)
    assert out.writes == 1  # one batched write
    lines = out.text.splitlines()
    assert lines[:2] == ["Enter: x", "Enter: y"]  # a single sender so far: no prefix
    assert lines[4:6] == ["[b/2] Enter: x", "[b/2] Enter: y"]
    t = m.totals()
    assert (t.senders, t.received, t.lines, t.lost) == (2, 4, 8, 1)
    text = summary(m, 3)
    assert "a/1" in text and "b/2" in text


def test_sender_table_is_bounded_lru() -> None:
    m = Monitor(max_senders=4)
    for i in range(20):
        m.feed(encode(f"s/{i}", 0, 1, ["Enter: x"]))
        m.feed(encode("keep/0", i, 0, ["Enter: x"]))
    assert len(m.senders) == 4 and "keep/0" in m.senders
    t = m.totals()
    assert (t.senders, t.received, t.dropped) == (21, 40, 20)


def test_function_table_is_bounded() -> None:
    table = FunctionTable(limit=100)
    body = "\n".join(f"Leave: f{i}, Duration: {i} ns" for i in range(1000))
    assert table.feed(body) == 1000
    assert len(table.table) <= 100
    assert table.top(1)[0][0] == "f999"
    assert table.forgotten > 0


def test_function_names_are_capped() -> None:
    # issue #17: 64 KB names grew the table to 1.3 GB
    table = FunctionTable(limit=100)
    body = "\n".join(f"Leave: {chr(97 + i % 26) * 60_000}{i}, Duration: 5 ns" for i in range(300))
    assert table.feed(body) == 300
    assert len(table.table) <= 100
    assert max(len(name) for name in table.table) == MAX_NAME
    assert all(name.endswith("…") for name in table.table)


def test_implausible_sequence_numbers_are_counted_as_malformed() -> None:
    m = Monitor()
    assert m.feed(encode("h/1", 0, 0, LINES)) is not None
    assert m.feed(encode("h/1", 10**19, 0, LINES)) is None
    assert m.feed(encode("h/1", 1, 0, LINES)) is not None
    stats = m.senders["h/1"]
    assert (stats.lost, stats.implausible, m.malformed) == (0, 1, 1)
    assert "implausible sequence number" in m.last_malformed


def test_prefixed() -> None:
    assert prefixed("s", "a\nb") == "[s] a\n[s] b"


def test_screen_view_redraws_summary_and_tail() -> None:
    from profkit.monitor.view import ScreenView

    m = Monitor()
    out = _Out()
    view = ScreenView(out, top=2, width=100, height=20)  # type: ignore[arg-type]
    for seq in range(30):
        result = m.feed(encode("h/1", seq, 0, [f"Enter: f{seq}"]))
        assert result is not None
        view.show(m, *result)
    view.tick(m)
    screen = out.text
    assert screen.startswith("\x1b[H\x1b[2J")
    assert "profkit monitor (Ctrl-C to stop): 1 sender, 30 datagrams" in screen
    assert "Enter: f29" in screen and "Enter: f0\n" not in screen
    assert max(len(line) for line in screen.splitlines()) <= 100 + len("\x1b[H\x1b[2J")


def test_screen_view_limits_sender_rows() -> None:
    from profkit.monitor.view import ScreenView

    m = Monitor()
    for i in range(40):
        m.feed(encode(f"s/{i}", 0, 0, ["Enter: x"]), float(i))
    out = _Out()
    view = ScreenView(out, top=2, width=100, height=24)  # type: ignore[arg-type]
    view.tick(m)
    assert "s/39" in out.text and "s/0 " not in out.text
    assert "(+34 less recent senders not shown)" in out.text
    assert "s/0" in summary(m, 2)  # the final summary lists them all


def test_plain_view_escapes_control_characters_only_when_asked() -> None:
    """On a terminal (escape=True) a sender's ESC/BEL must not reach it; a file or pipe
    gets the lines exactly as sent."""
    monitor = Monitor()
    for escape, expected in ((True, "a\\x1b]0;t\\x07\nb\n"), (False, "a\x1b]0;t\x07\nb\n")):
        out = _Out()
        view = PlainView(out, escape=escape)  # type: ignore[arg-type]
        view.show(monitor, "h/1", "a\x1b]0;t\x07\nb")
        view.close(monitor)
        assert out.text == expected


def test_idle_waits_are_not_hot_and_not_their_callers_self_time() -> None:
    table = FunctionTable()
    body = "\n".join(
        [
            "Enter: app.worker",
            "    Enter: queue.Queue.get",
            "        Enter: threading.Condition.wait",
            "            Leave: lock.acquire, Duration: 900 ms",
            "        Leave: threading.Condition.wait, Duration: 900 ms",
            "    Leave: queue.Queue.get, Duration: 901 ms",
            "    Leave: app.job, Duration: 5 ms",
            "    Leave: selectors.EpollSelector.select, Duration: 50 ms",
            "Leave: app.worker, Duration: 960 ms",
        ]
    )
    assert table.feed(body) == 6
    top = {name: own for name, own, *_ in table.top(10)}
    assert top == {"app.job": 5_000_000, "app.worker": 4_000_000}


def test_unanalysed_datagrams_are_counted_and_shown_but_not_ranked() -> None:
    m = Monitor()
    assert m.feed(encode("h/1", 0, 0, LINES), 0.0, False) is not None
    assert m.feed(encode("h/1", 1, 0, LINES[2:3]), 0.0) is not None
    t = m.totals()
    assert (t.received, t.lines, t.lost, m.unanalysed) == (2, 6, 0, 1)
    assert {row[0]: row[3] for row in m.functions.top(10)} == {"myapp.work": 1}
    assert "hot list from 1 of 2 datagrams" in summary(m, 5)
