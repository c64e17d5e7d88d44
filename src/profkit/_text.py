"""One escaping rule for text that reaches a human: error lines, warnings, report views.

Names in a profile, a perf map or a file name come from anywhere. Written raw to a
terminal, ``ESC ] 0;…BEL`` retitles the window, a CSI sequence clears the screen, NUL or
a newline breaks the table, U+202E reverses what follows and a 20 MB name floods the
scrollback. :func:`escape` makes every such character visible as a Python-style escape
(``\\x1b``, ``\\u202e``) and cuts very long text, so what the reader sees is what the file
holds. Machine formats (JSON, exports) do not use it: they keep the bytes as they are.

Standard library only and nothing imported at module level beyond :mod:`re`: the
collector and the CLI's error path both use it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    import re

__all__ = ["MAX_MESSAGE_CHARS", "escape"]

#: Longest text :func:`escape` returns by default (error lines, warnings).
MAX_MESSAGE_CHARS = 2000

# C0 and C1 controls, DEL; the bidirectional and other invisible format characters
# (U+061C, U+200B..U+200F, U+2028..U+202E, U+2060..U+2069, U+FEFF); lone surrogates
# (undecodable bytes of a file name arrive as U+DC80..U+DCFF).
# (As text: re compiles it on the first name that needs escaping, not at every start-up.)
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _one(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, limit: int | None = None) -> str:
    """``text`` with every control or invisible formatting character escaped; cut to
    ``limit`` characters (with a note of how many were left out) when given.

    Cheap when there is nothing to do: a printable ASCII name is returned as it is.
    """
    if limit is not None and len(text) > limit:
        cut = len(text) - limit
        text = text[:limit]
        suffix = f"…[{cut} more characters]"
    else:
        suffix = ""
    # Every character _UNSAFE matches is one str.isprintable() refuses (Cc, Cf, Cs, Zl, Zp,
    # U+2065 unassigned), so printable text (non-ASCII too: the tree's µs) needs no re.
    if not text.isprintable():
        import re  # on the first name that needs it: not a cost of every start-up

        text = re.sub(_UNSAFE, _one, text)
    return text + suffix
