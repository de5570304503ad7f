"""One function for every name read from a file that reaches a terminal or a report: `printable`.

Workflow names, node types, host names, step names, run ids and error details come from files a user (or an
attacker) wrote. Echoed as they are, an escape sequence can retitle the terminal, move the cursor to overwrite
an earlier line, hide text (a "PASS" printed over a "FAIL"), or, in some terminals, write to the clipboard
(OSC 52); a bidirectional override can make a name read backwards. `printable` removes all of it: ANSI/ECMA-48
escape sequences (CSI, OSC, DCS and the rest, with their parameters), every other C0 and C1 control
character, DEL, and the Unicode format characters that reorder or hide text. A newline or tab becomes a space,
so one name stays on one line.
"""

from __future__ import annotations

import re
import unicodedata

# ECMA-48: ESC [ ... final (CSI), ESC ] ... BEL or ST (OSC), ESC P/X/^/_ ... ST (DCS, SOS, PM, APC), and the
# two-character escapes (ESC followed by one byte in 0x20-0x7e). The 8-bit forms (0x9b CSI, 0x9d OSC, ...) too.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI with parameters and final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[\x20-\x7e]?"  # any other escape, and a lone ESC
)
_SPACES = re.compile(r"[\t\n\r\v\f\u2028\u2029\x85]+")
MAX_SHOWN = 200  # a name longer than this is cut (with an ellipsis): it is echoed, not stored


def _shown(ch: str) -> str:
    """What a character becomes: itself, a space (any Unicode space), or nothing. Cc: C0/C1 controls and DEL;
    Cf: format characters (bidi overrides, zero-width joiners, a BOM); Cs: lone surrogates (undecodable bytes);
    Co/Cn: private use and unassigned; Zl/Zp: line and paragraph separators."""
    category = unicodedata.category(ch)
    if category == "Zs":
        return " "
    return "" if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") else ch


def printable(value: object, *, limit: int = MAX_SHOWN) -> str:
    """`value` as text that is safe to print on a terminal or into a report: escape sequences and control and
    format characters removed, line breaks and tabs as one space, at most `limit` characters."""
    text = value if isinstance(value, str) else str(value)
    text = _ESCAPES.sub("", text)
    text = _SPACES.sub(" ", text)
    text = "".join(ch if " " < ch < "\x7f" else _shown(ch) for ch in text)
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "\u2026"
    return text


def is_printable(value: str) -> bool:
    """True when `printable` would leave `value` as it is (a name a model may accept unchanged)."""
    return printable(value, limit=max(len(value), 1)) == value
