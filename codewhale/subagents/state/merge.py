"""Merging this process's records into what is on disk, so no process loses another's.

Several processes may write one workspace's state (two `codewhale exec`, the app and a
script). Each rewrites the file from the records on disk, read under the lock, and
its own, record by record (by agent id) against the base, the version its memory
held when it last loaded or wrote that record:
- unchanged here since then: the disk's version stands (another process may have
  moved it on, or dropped it);
- changed here only: ours;
- changed on both sides: the newer `updated_at_ms` (ours on a tie, as it is being
  written now).
Records only on disk (another run's, or of a shape a newer version wrote) are kept as
they are.
"""

from __future__ import annotations

from typing import Any

from codewhale.subagents.records import TERMINAL

MAX_RECORDS = 256

Record = dict[str, Any]


def merge(base: dict[str, Record], disk: dict[str, Record], ours: list[Record]) -> list[Record]:
    """Every record to write: `disk` with `ours` merged in against `base` (see above)."""
    merged = dict(disk)
    for data in ours:
        agent_id = data["agent_id"]
        seen = base.get(agent_id)
        if seen is not None and data == seen:
            continue
        current = disk.get(agent_id)
        if current is None or current == seen or data["updated_at_ms"] >= current["updated_at_ms"]:
            merged[agent_id] = data
    return trim(list(merged.values()))


def trim(records: list[Record]) -> list[Record]:
    """At most MAX_RECORDS, dropping the oldest finished records first."""
    if len(records) <= MAX_RECORDS:
        return records
    excess = len(records) - MAX_RECORDS
    finished = sorted(
        (r for r in records if r["status"] in TERMINAL), key=lambda r: r["updated_at_ms"]
    )
    dropped = {id(r) for r in finished[:excess]}
    kept = [r for r in records if id(r) not in dropped]
    return kept[-MAX_RECORDS:]
