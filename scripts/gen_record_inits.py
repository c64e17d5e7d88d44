#!/usr/bin/env python3
"""Generate ``src/profkit/_record_inits.py``: the ``__init__`` templates of record classes.

Why a generated module: compiling an ``__init__`` when a class is created costs ~90 us
(0.5-1 M instructions) a class, and ``profkit run`` creates two dozen record classes
between its start and its exit. These templates are compiled once, into the module's
``.pyc``; :mod:`profkit._record` renames a template's placeholder fields ``f0, f1, ...``
to a class's own (``CodeType.replace``), which costs well under a microsecond. One
template per field count and kind: ``plain<N>`` stores attributes (mutable records),
``frozen<N>`` sets them through ``object.__setattr__`` (frozen records refuse
``setattr``), with the field name as a constant.

Usage::

    python scripts/gen_record_inits.py        # rewrites src/profkit/_record_inits.py
    python scripts/gen_record_inits.py --check  # exit 1 if the file is not up to date
"""

from __future__ import annotations

import sys
from pathlib import Path

#: Templates up to this many fields; a bigger record compiles its own ``__init__``.
MAX_FIELDS = 20
LINE_LENGTH = 100  #: pyproject.toml's [tool.ruff] line-length
TARGET = Path(__file__).resolve().parents[1] / "src" / "profkit" / "_record_inits.py"

HEADER = '''\
"""``__init__`` templates for :mod:`profkit._record` (generated: do not edit).

Made by ``scripts/gen_record_inits.py`` (see there for why); ``f0, f1, ...`` are renamed
to a record's fields. ``plain<N>`` stores attributes, ``frozen<N>`` goes through
``object.__setattr__`` past a frozen record's refusing ``__setattr__``.
"""

# mypy: allow-untyped-defs

_set = object.__setattr__
MAX_FIELDS = {max_fields}
'''


def _template(n: int, frozen: bool) -> str:
    params = "".join(f", f{i}" for i in range(n))
    if frozen:
        body = [f'    _set(self, "f{i}", f{i})' for i in range(n)]
    else:
        body = [f"    self.f{i} = f{i}" for i in range(n)]
    name = f"{'frozen' if frozen else 'plain'}{n}"
    head = f"def {name}(self{params}):"
    if len(head) > LINE_LENGTH:  # as ruff format wraps it
        head = f"def {name}(\n    self{params}\n):"
    return f"\n\n{head}\n" + "\n".join(body or ["    pass"]) + "\n"


def render() -> str:
    parts = [HEADER.format(max_fields=MAX_FIELDS)]
    for n in range(MAX_FIELDS + 1):
        parts.append(_template(n, frozen=False))
        parts.append(_template(n, frozen=True))
    return "".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run scripts/gen_record_inits.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
