"""The start-up checks a receipt miss forks: the child's verdict, or the parent's own.

Each case runs in a fresh interpreter: a fork copies only the calling thread, so
ForkedChecks refuses to fork while other threads run (as the test runner's do).
"""

from __future__ import annotations

import subprocess
import sys
import threading

from codewhale.tui.forked_checks import ForkedChecks

CASES = """
import os, threading
from codewhale.tui.forked_checks import ForkedChecks

parent = os.getpid()

def in_child(verdict):
    # What the checks answer in the child; the parent must never run them itself here.
    def checks():
        assert os.getpid() != parent, "checked in the parent"
        return verdict
    return checks

def dies_in_child():
    if os.getpid() != parent:
        os._exit(3)  # killed, or crashed: no answer on the pipe
    return "checked in the parent"

print(ForkedChecks.start(in_child("config error: bad")).problem())
print(ForkedChecks.start(in_child(None)).problem())
print(ForkedChecks.start(dies_in_child).problem())
"""


def test_the_childs_verdict_arrives_and_a_silent_child_is_checked_for():
    result = subprocess.run(
        [sys.executable, "-c", CASES], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["config error: bad", "None", "checked in the parent"]


def test_no_fork_while_other_threads_run():
    release = threading.Event()
    waiter = threading.Thread(target=release.wait)
    waiter.start()
    try:
        assert ForkedChecks.start(lambda: None) is None
    finally:
        release.set()
        waiter.join()
