"""ReadyToRun (R2R) images: read the precompiled code's layout and names, build r2rmaps.

``read_r2r_image`` / ``load_r2r_image`` parse the PE, CLI and ReadyToRun headers, the
entry-point tables and the ECMA-335 metadata; ``build_r2rmap`` turns the result into
the perf map crossgen2 ``--perfmap`` would have written. Errors are
:class:`~profkit.errors.FormatError` with file and offset; an IL-only assembly raises
:class:`NotReadyToRunError`. See ``docs/perfmap.md``.
"""

from profkit.formats.r2r.image import (
    Component,
    MethodBody,
    NotReadyToRunError,
    R2RImage,
    load_r2r_image,
    read_r2r_image,
)
from profkit.formats.r2r.mapbuilder import build_r2rmap, describe_r2r, image_signature

__all__ = [
    "Component",
    "MethodBody",
    "NotReadyToRunError",
    "R2RImage",
    "build_r2rmap",
    "describe_r2r",
    "image_signature",
    "load_r2r_image",
    "read_r2r_image",
]
