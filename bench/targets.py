"""The issues' targets, printed in one shape by every benchmark so `make bench` can list them.

A benchmark calls `target()` once per figure it owns; bench/__main__.py collects the lines
that start with MARK from each benchmark's output and prints them again, together, at the end.
"""

from __future__ import annotations

import operator

MARK = "target:"
_COMPARE = {"<": operator.lt, "≤": operator.le, ">": operator.gt, "≥": operator.ge}


def target(name: str, measured: float, op: str, limit: float, unit: str = "×") -> bool:
    """Print `target: <name> <measured><unit> (<op> <limit><unit>) met|NOT met`; True if met."""
    met = _COMPARE[op](measured, limit)
    verdict = "met" if met else "NOT met"
    print(f"{MARK} {name} {measured:.2f}{unit} ({op} {limit:g}{unit}) {verdict}", flush=True)
    return met
