"""When to try a failed request again, and how long to wait first.

The client is the only layer that retries (see ChatClient._with_retries); this
module decides whether another attempt fits the budget and what the user is told.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

MAX_BACKOFF_SECS = 20.0
# The longest Retry-After we wait for. A server asking for more (an hour-long rate-limit
# window) is reported at once: the user can decide, rather than watch a silent terminal.
MAX_RETRY_AFTER_SECS = 60.0


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


@dataclass(frozen=True)
class Retrying:
    """Told to the caller of a stream: attempt `attempt` of `max_attempts` follows in `delay` s."""

    attempt: int
    max_attempts: int
    delay: float
    reason: str  # a few words: "HTTP 429, Retry-After", "connection failed"


@dataclass
class RetryBudget:
    """Counts attempts and keeps every wait inside one overall deadline."""

    max_retries: int
    deadline_secs: float
    base_delay_secs: float = 0.5
    rng: random.Random | None = None

    def __post_init__(self) -> None:
        self._started = time.monotonic()
        # A budget is consulted after an attempt has failed, so one is already spent.
        self.attempts = 1
        self._rng = self.rng or _JITTER

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def next_delay(self, retry_after: float | None) -> float | None:
        """The wait before the next attempt, or None when retries or time are used up."""
        if self.attempts > self.max_retries:
            return None
        if retry_after is not None:
            if retry_after > MAX_RETRY_AFTER_SECS:
                return None
            delay = retry_after
        else:
            # Exponential backoff with jitter, so parallel children do not retry in lockstep.
            ceiling = min(self.base_delay_secs * 2 ** (self.attempts - 1), MAX_BACKOFF_SECS)
            delay = ceiling / 2 + self._rng.uniform(0, ceiling / 2)
        if delay > self.deadline_secs - (time.monotonic() - self._started):
            return None
        self.attempts += 1
        return delay

    def give_up_note(self, retry_after: float | None) -> str:
        """Why next_delay said no, for the end of the error message."""
        plural = "" if self.attempts == 1 else "s"
        tried = f"gave up after {self.attempts} attempt{plural}"
        if self.attempts > self.max_retries:
            return tried
        deadline = f"the retry deadline (retry_deadline_secs = {self.deadline_secs:g})"
        if retry_after is None:
            return f"{deadline} leaves no time for another; {tried}"
        limit = (
            f"more than the {MAX_RETRY_AFTER_SECS:g} s CodeWhale waits"
            if retry_after > MAX_RETRY_AFTER_SECS
            else f"past {deadline}"
        )
        asked = math.ceil(retry_after)
        return f"the server asked to wait {asked} s before trying again, {limit}; {tried}"
