"""The magic numbers that tell the binary profile formats apart (spec §1).

Kept apart from the readers so that sniffing a file (``reader.sniff``) does not import
the reader of a format the file is not in.
"""

from __future__ import annotations

#: Indexed (.profdata) magic: ``\xfflprofi\x81`` (indexed files are little-endian).
INDEXED_MAGIC = bytes.fromhex("ff6c70726f666981")

#: Raw (.profraw) magic → (byte order, pointer size): both byte orders, 64- and 32-bit.
RAW_MAGICS: dict[bytes, tuple[str, int]] = {
    bytes.fromhex("8172666f72706cff"): ("<", 8),
    bytes.fromhex("8152666f72706cff"): ("<", 4),
    bytes.fromhex("ff6c70726f667281"): (">", 8),
    bytes.fromhex("ff6c70726f665281"): (">", 4),
}
