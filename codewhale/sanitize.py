"""Make model-authored text safe to print in a terminal."""

from __future__ import annotations

import re

# C0/C1 controls except tab and newline (ESC starts terminal escape sequences), plus the
# Unicode bidi controls that can make displayed text read differently from what it is.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str) -> str:
    """Drop control and bidi characters; keep tabs, newlines and everything printable."""
    return _UNSAFE.sub("", text.replace("\r\n", "\n"))


# Characters that would let one value pass for several lines, or hide what follows it.
_LINE_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def clean_line(text: str) -> str:
    """`text` as one printable line: breaks and tabs spelled out, controls dropped."""
    return clean_text(text.translate(_LINE_BREAKS))
