"""Text from records is untrusted: neutralise it for spreadsheets and terminals.

A record's error, flags or names may hold anything a crashing framework (or a hostile file)
printed. Two places need care:

- a CSV cell starting with ``= + - @`` (or a tab or carriage return) is run as a formula by
  Excel and LibreOffice ("CSV injection"); :func:`csv_cell` prefixes such text with ``'``, as
  OWASP recommends, and leaves numbers alone;
- printed text with terminal escape sequences (``ESC [ ...``) or other control characters can
  rewrite the screen or the window title; :func:`plain` removes them, keeping newlines and tabs.

The summary table, the CSV, the report's CSV export and every command's printed errors call these.
"""

from __future__ import annotations

import re

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# CSI/OSC/other ESC sequences, then any remaining C0/C1 control character except \n and \t
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def csv_cell(value: object) -> object:
    """``value`` safe for a CSV cell: text that a spreadsheet would run as a formula gets a
    leading ``'``; numbers, booleans and ``None`` pass unchanged."""
    if not isinstance(value, str):
        return value
    text = plain(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def plain(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (``\\n``, ``\\t`` kept)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))
