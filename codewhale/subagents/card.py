"""One sub-agent's record as a short card: `codewhale agents show` and the app's /agent show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codewhale.sanitize import clean_text
from codewhale.subagents.budget import Budget

# The record's fields the card lists under its heading, in this order.
CARD_FIELDS = ("objective", "model", "workspace", "worker_status", "steps_taken", "error")


def transcript_lines(path: Path) -> int:
    """Lines in a transcript (counted as bytes: it may hold anything); 0 if unreadable."""
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def agent_card(data: dict[str, Any]) -> str:
    """`data`: a record's to_json() with `transcript_lines` added. Model-written text in it
    is cleaned of control sequences, since it goes to a terminal."""
    lines = [f"{data['agent_id']} ({data['nickname']}, {data['type']}) — {data['status']}"]
    for key in CARD_FIELDS:
        if data.get(key) not in (None, ""):
            lines.append(f"  {key}: {clean_text(str(data[key]))}")
    if data.get("runs", 1) > 1:  # revived by a message after it finished
        lines.append(f"  runs: {data['runs']}")
    usage = data.get("usage") or {}
    if usage.get("input") or usage.get("output"):
        lines.append(f"  tokens: {usage.get('input', 0):,} in · {usage.get('output', 0):,} out")
    # Read back through Budget: the state file may hold anything.
    if budget := Budget.from_json(data.get("budget") or {}).to_json():
        lines.append(
            "  budget: " + " · ".join(f"{name}={value:,}" for name, value in budget.items())
        )
    lines.append(
        f"  transcript: {data['artifacts'].get('transcript')} ({data['transcript_lines']} lines)"
    )
    if data.get("result"):
        lines.append("\n" + clean_text(data["result"]))
    return "\n".join(lines)
