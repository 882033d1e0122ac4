"""How a text file's bytes become text and back, so an edit rewrites no byte it did not change.

UTF-8 (with or without a byte-order mark), and UTF-16 or UTF-32 that starts with a mark,
are decoded strictly, which is lossless by construction. A file valid in none of them is
in some legacy 8-bit encoding, which its bytes cannot name: it is read as Windows-1252
when it has bytes only that code page gives letters to (0x80-0x9F: € “ ” — …) and they
decode back to the same bytes, else as Latin-1, which maps every byte to one character
and so always round-trips. What can fail is new text holding a character the file's
encoding lacks: that write is refused, never stored as a replacement character.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import BinaryIO

from codewhale.tools.base import ToolError

# A NUL in the first block of text means binary, as git decides it.
BINARY_SNIFF_BYTES = 8192
_CHUNK_BYTES = 1024 * 1024
# Every byte but 0x80-0x9F, which Windows-1252 has letters for and Latin-1 only control
# codes: deleting these from a block (bytes.translate, fast) leaves its C1 bytes.
_ALL_BUT_C1 = bytes(byte for byte in range(256) if not 0x80 <= byte <= 0x9F)


class BinaryFile(ToolError):
    """The file holds NUL characters: it is not text the file tools show or edit."""


@dataclass(frozen=True)
class TextEncoding:
    """A Python codec, the name people know it by, and the byte-order mark the file starts with."""

    codec: str
    name: str
    bom: bytes = b""

    @property
    def legacy(self) -> bool:
        """An 8-bit code page, chosen because the file is not valid Unicode."""
        return self.codec in ("cp1252", "iso-8859-1")

    def describe(self) -> str:
        """How messages name the way the file is stored."""
        if self.legacy:
            return f"{self.name} (not valid UTF-8)"
        return f"{self.name} with a byte-order mark" if self.bom else self.name

    def note(self) -> str | None:
        """What read_file adds below a file in this encoding (None for plain UTF-8)."""
        if self.legacy:
            return f"[shown as {self.name}: the file is not valid UTF-8; edits keep its encoding]"
        if self.codec != "utf-8":
            return f"[{self.describe()}; edits keep its encoding]"
        return None

    def decode(self, data: bytes) -> str:
        """The text of a file this encoding was detected in (its mark left out)."""
        return data[len(self.bom) :].decode(self.codec)

    def encode(self, text: str, label: str) -> bytes:
        """`text` as the file stores it, mark first; a clear refusal for a character it lacks."""
        try:
            return self.bom + text.encode(self.codec)
        except UnicodeEncodeError as error:
            raise ToolError(self._refusal(error, label)) from None

    def looks_binary(self, head: bytes) -> bool:
        """Whether the file's first bytes decode to text holding a NUL character."""
        sample = head[len(self.bom) : len(self.bom) + BINARY_SNIFF_BYTES]
        return "\x00" in sample.decode(self.codec, errors="replace")

    def _refusal(self, error: UnicodeEncodeError, label: str) -> str:
        """Every character of the text the encoding lacks (the first few), and what to do."""
        lacking = [c for c in dict.fromkeys(error.object) if not self._holds(c)]
        characters = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in lacking[:5])
        found = f"{label} is stored as {self.describe()}, and the new text has {characters}"
        if not self.legacy:
            return (
                f"{found}, half of a UTF-16 surrogate pair, which {self.name} cannot hold; "
                "nothing was written. Send whole characters."
            )
        return (
            f"{found}, which {self.name} cannot hold; nothing was written. Use characters "
            f"{self.name} has (ASCII always works, e.g. 'EUR' for '€', '-' for '—'), or "
            f"convert the file to UTF-8 first (iconv -f {self.codec} -t utf-8)."
        )

    def _holds(self, character: str) -> bool:
        try:
            character.encode(self.codec)
        except UnicodeEncodeError:
            return False
        return True


UTF8 = TextEncoding("utf-8", "UTF-8")
# Codec names iconv knows too, for the advice to convert a file.
WINDOWS_1252 = TextEncoding("cp1252", "Windows-1252")
LATIN_1 = TextEncoding("iso-8859-1", "Latin-1")
# UTF-32-LE's mark begins with UTF-16-LE's, so it is tried first.
_MARKED = (
    TextEncoding("utf-32-le", "UTF-32-LE", codecs.BOM_UTF32_LE),
    TextEncoding("utf-32-be", "UTF-32-BE", codecs.BOM_UTF32_BE),
    TextEncoding("utf-8", "UTF-8", codecs.BOM_UTF8),
    TextEncoding("utf-16-le", "UTF-16-LE", codecs.BOM_UTF16_LE),
    TextEncoding("utf-16-be", "UTF-16-BE", codecs.BOM_UTF16_BE),
)


def detect(chunks: Iterable[bytes]) -> TextEncoding:
    """The encoding of the bytes `chunks` yields in order: a whole file, or its first part."""
    stream = iter(chunks)
    first = next(stream, b"")
    marked = next((encoding for encoding in _MARKED if first.startswith(encoding.bom)), None)
    if marked is None and first.isascii():
        # ASCII is UTF-8, the first choice: nothing to decode unless more bytes follow.
        following = next(stream, None)
        if following is None:
            return UTF8
        stream = chain([following], stream)
    decoders = [
        (encoding, codecs.getincrementaldecoder(encoding.codec)(), len(encoding.bom))
        for encoding in (marked, UTF8)
        if encoding is not None
    ]
    c1_seen, windows_1252_fits = False, True
    for chunk in chain([first], stream):
        decoders = [
            (encoding, decoder, 0)
            for encoding, decoder, skip in decoders
            if _decodes(decoder, chunk[skip:])
        ]
        if chunk.translate(None, _ALL_BUT_C1):
            c1_seen = True
            windows_1252_fits = windows_1252_fits and _round_trips(chunk, WINDOWS_1252.codec)
    for encoding, decoder, _ in decoders:
        if _decodes(decoder, b"", final=True):
            return encoding
    return WINDOWS_1252 if c1_seen and windows_1252_fits else LATIN_1


def decode_text(data: bytes, label: str) -> tuple[str, TextEncoding]:
    """A whole file's text and encoding, or BinaryFile naming it `label`."""
    encoding = detect([data])
    if encoding.looks_binary(data):
        raise BinaryFile(f"{label} is a binary file ({len(data)} bytes); not shown")
    return encoding.decode(data), encoding


def read_chunks(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    """At most `limit` bytes of `stream`, a block at a time."""
    while limit > 0 and (chunk := stream.read(min(_CHUNK_BYTES, limit))):
        limit -= len(chunk)
        yield chunk


def _decodes(decoder: codecs.IncrementalDecoder, data: bytes, final: bool = False) -> bool:
    try:
        decoder.decode(data, final)
    except UnicodeDecodeError:
        return False
    return True


def _round_trips(chunk: bytes, codec: str) -> bool:
    """Whether `chunk` decodes in the 8-bit `codec` and encodes back to the very same bytes."""
    try:
        return chunk.decode(codec).encode(codec) == chunk
    except UnicodeError:
        return False
