"""How deep a JSON text nests, found in linear time before any parser sees it.

A body arrives from an unauthenticated-until-proven caller, so every step here is linear
in its size whatever it holds: strings are cut out by one regex that can never fail
once it has started (an unterminated string runs to the end of the text, so no start
position is ever scanned twice), and the nesting is summed by C-level iterators."""

from __future__ import annotations

import operator
import re
from itertools import accumulate, repeat

# A JSON string: a quote, then any run of plain characters or escape pairs (possessive:
# nothing is ever given back), then the closing quote, or the end of the text for an
# unterminated one (the parser refuses those later). A lone backslash at the very end
# is the one way an escape pair can be cut short; it is taken as the end too.
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
# Openers become 2, closers 0, everything else is dropped: each byte then steps the
# depth by its value minus one.
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_too_deep(body: bytes, max_depth: int) -> bool:
    """Whether ``body`` nests arrays/objects deeper than ``max_depth`` (brackets inside
    strings do not count)."""
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return False
    brackets = _STRING.sub(b"", body).translate(_STEPS, _NOT_BRACKETS)
    depths = accumulate(map(operator.sub, brackets, repeat(1)))
    return max(depths, default=0) > max_depth
