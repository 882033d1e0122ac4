"""`codewhale exec` plain output: progress and retries on stderr, the answer on stdout."""

from __future__ import annotations

import io

from codewhale.headless import Printer
from codewhale.runtime import events


def test_a_retry_is_announced_on_stderr_only():
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(False, out, err)
    printer(events.Retrying(attempt=2, max_attempts=5, delay=30.0, reason="HTTP 429, Retry-After"))
    assert err.getvalue() == "retrying in 30.0 s: HTTP 429, Retry-After (attempt 2 of 5)\n"
    assert out.getvalue() == ""
