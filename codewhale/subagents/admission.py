"""Admission: the cap on running children and the queue for launch slots (spec §4)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from codewhale.subagents.spawn import SpawnError

QUEUED_TEXT = "queued: waiting for a sub-agent launch slot"
QUEUE_HEARTBEAT_SECS = 10.0


class Admission:
    def __init__(
        self,
        max_concurrent: int,
        launch_concurrency: int | None,  # None: as many launches at once as may run
        queue_heartbeat_secs: float = QUEUE_HEARTBEAT_SECS,
    ) -> None:
        self.max_concurrent = max_concurrent
        self.queue_heartbeat = queue_heartbeat_secs
        self._launch = asyncio.Semaphore(launch_concurrency or max_concurrent)

    def check_capacity(self, running: int) -> None:
        """Refuse a new (or continued) child once `max_concurrent` are running."""
        if running >= self.max_concurrent:
            raise SpawnError(
                f"Sub-agent limit reached (max {self.max_concurrent}, running {running}). "
                "Close or wait for an existing agent to finish."
            )

    @contextlib.asynccontextmanager
    async def slot(self, still_queued: Callable[[], None]) -> AsyncIterator[None]:
        """Hold a launch slot; `still_queued` is called every heartbeat while waiting."""
        acquire = asyncio.ensure_future(self._launch.acquire())
        try:
            while True:
                done, _ = await asyncio.wait({acquire}, timeout=self.queue_heartbeat)
                if done:
                    break
                still_queued()
        except asyncio.CancelledError:
            if acquire.done() and not acquire.cancelled():
                self._launch.release()
            else:
                acquire.cancel()
            raise
        try:
            yield
        finally:
            self._launch.release()
