"""When to try a failed request again, and how long to wait first."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

MAX_BACKOFF_SECS = 20.0


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (delta-seconds or HTTP date); None if unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment is None:
        return None
    current = time.time() if now is None else now
    return max(moment.timestamp() - current, 0.0)


# Seeding a Random costs an os.urandom call; one generator serves every request.
_JITTER = random.Random()


@dataclass
class RetryBudget:
    """Counts attempts and keeps every wait inside one overall deadline."""

    max_retries: int
    deadline_secs: float
    base_delay_secs: float = 0.5
    rng: random.Random | None = None

    def __post_init__(self) -> None:
        self._started = time.monotonic()
        self.retries_done = 0
        self._rng = self.rng or _JITTER

    def next_delay(self, retry_after: float | None) -> float | None:
        """The wait before the next attempt, or None when retries or time are used up."""
        if self.retries_done >= self.max_retries:
            return None
        if retry_after is not None:
            delay = retry_after
        else:
            # Exponential backoff with jitter, so parallel children do not retry in lockstep.
            ceiling = min(self.base_delay_secs * 2**self.retries_done, MAX_BACKOFF_SECS)
            delay = ceiling / 2 + self._rng.uniform(0, ceiling / 2)
        remaining = self.deadline_secs - (time.monotonic() - self._started)
        if delay > remaining:
            return None
        self.retries_done += 1
        return delay
