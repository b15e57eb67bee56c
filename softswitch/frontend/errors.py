"""The one exception type for mistakes in a P4 program: always printed as `file:line:col: message`."""

from __future__ import annotations

from softswitch.frontend.ir import SourceLoc


class P4Error(Exception):
    """A P4 program the front end refuses (syntax, names, types, or a construct outside the subset).

    `loc` points at the offending token in the original source file; `message` says what is wrong without
    the location, so tests and tools can check either part.
    """

    def __init__(self, loc: SourceLoc, message: str) -> None:
        super().__init__(f"{loc.file}:{loc.line}:{loc.col}: {message}")
        self.loc = loc
        self.message = message


def unsupported(loc: SourceLoc, what: str) -> P4Error:
    """A construct outside softswitch's P4 subset: refused rather than mis-executed."""
    return P4Error(loc, f"unsupported construct '{what}'")
