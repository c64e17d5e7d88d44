"""Human- and script-facing renderings of LLVM instrumentation profiles.

``profkit.formats.instrprof`` turns bytes into a model and back; turning the model into
what ``llvm-profdata show`` and ``overlap`` print (and profkit's JSON variant) is
presentation, kept here so library users get it without the CLI, and the formats
package stays bytes ↔ model only. Modules: :mod:`.llvm_show` (``show`` text),
:mod:`.json_show` (``show --json``), :mod:`.llvm_overlap` (``overlap`` text),
:mod:`.show_options`, :mod:`.topn`; ``show`` text prints its records in :mod:`.llvm_show`,
value-profile sites in :mod:`.show_values` and its summary in :mod:`.show_footer`. Module
names differ from the functions they define, so importing a module never shadows an
exported function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profkit._lazy import lazy_exports

if TYPE_CHECKING:
    from profkit.present.instrprof.json_show import show_json
    from profkit.present.instrprof.llvm_overlap import format_overlap
    from profkit.present.instrprof.llvm_show import show_text
    from profkit.present.instrprof.show_options import ShowOptions

_EXPORTS = {
    "ShowOptions": "show_options",
    "format_overlap": "llvm_overlap",
    "show_json": "json_show",
    "show_text": "llvm_show",
}
__all__ = ["ShowOptions", "format_overlap", "show_json", "show_text"]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
