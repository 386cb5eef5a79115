"""Showing untrusted text (file names, messages) where a person reads it."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with control and other invisible characters (and undecodable bytes of
    a file name) written as escapes, so a hostile file name cannot rewrite a terminal
    or a table."""
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif 0xDC80 <= ord(char) <= 0xDCFF:  # a byte that was not valid UTF-8
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        else:
            out.append(char.encode("unicode_escape").decode("ascii"))
    return "".join(out)
