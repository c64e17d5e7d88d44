"""The size rules of issue #10: no module over 400 lines, no function over 80.

A long module usually holds more than one concern and a long function more than one step; both
are harder to review and to change. The limits are the house style's (STYLE.md, "files < 400
lines"). Anything over them must be listed in ``ALLOWED`` below with a one-line reason a reviewer
accepts (a table of data, say), so an exception is a decision, not an accident.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "profkit"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

#: "path" (a module) or "path::Qualified.name" (a function) -> why it may be over the limit
ALLOWED: dict[str, str] = {
    "_record_inits.py": "generated (scripts/gen_record_inits.py): one __init__ template per field"
    " count, a table of code rather than code to read",
}


def _functions(
    node: ast.AST, prefix: str = ""
) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method under ``node``, by qualified name (``Class.method``)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((prefix + child.name, child))
            found += _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            found += _functions(child, f"{prefix}{child.name}.")
        else:
            found += _functions(child, prefix)
    return found


def _offenders() -> dict[str, int]:
    """Each module or function over its limit, with its length in lines."""
    over: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            over[rel] = lines
        for name, func in _functions(ast.parse(text, str(path))):
            # from the ``def`` line to the last line of the body; decorators are not counted
            length = (func.end_lineno or func.lineno) - func.lineno + 1
            if length > MAX_FUNCTION_LINES:
                over[f"{rel}::{name}"] = length
    return over


def test_no_module_or_function_over_the_limit() -> None:
    bad = [f"{key}: {n} lines" for key, n in _offenders().items() if key not in ALLOWED]
    assert not bad, (
        f"over {MAX_MODULE_LINES} lines per module / {MAX_FUNCTION_LINES} per function "
        "(split by concern, or add to ALLOWED with a reason):\n" + "\n".join(bad)
    )


def test_every_allowance_has_a_reason_and_is_still_needed() -> None:
    assert all(reason.strip() for reason in ALLOWED.values())
    # A stale entry would let the next growth of that module pass unseen. It warns rather than
    # fails: an engineer who lands a split should not turn main red because the entry (the
    # lead's to remove) is still here.
    offenders = _offenders()
    stale = [key for key in ALLOWED if key not in offenders]
    if stale:
        warnings.warn(
            "no longer over the limit, remove from tests/test_sizes.py ALLOWED: "
            + ", ".join(stale),
            stacklevel=1,
        )
