"""profkit._text.escape: the one rule for text shown to people."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from profkit._text import escape


def test_plain_names_unchanged() -> None:
    for name in ("json.dumps", "<lambda>", "función.ñ", "数据.处理"):
        assert escape(name) == name


def test_terminal_controls_escaped() -> None:
    hostile = "a\x1b]0;pwned\x07b\x1b[2Jc\x00d\u202ee\r\nf\x9b"
    out = escape(hostile)
    assert out == "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\x00d\\u202ee\\r\\nf\\x9b"


def test_long_text_cut() -> None:
    out = escape("x" * 1_000_000, 100)
    assert out.startswith("x" * 100) and out.endswith("[999900 more characters]")


@given(st.text())
def test_escaped_text_has_no_control_or_format_characters(text: str) -> None:
    import unicodedata

    out = escape(text)
    assert all(unicodedata.category(ch) not in ("Cc", "Cs") for ch in out)
    assert not any(ch in out for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
