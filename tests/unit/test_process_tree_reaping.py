"""Ending a command's process group as a subreaper: what escaped the group is killed and
its exit collected, so no zombie stays behind (real processes, in a fresh interpreter so
the test runner itself never becomes a subreaper)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, prctl")

# A shell leading its own group starts a `setsid` sleep (it leaves the group, as an inner
# sandbox does) and waits; the group is ended, the sleep is adopted by the subreaper.
SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    from codewhale import process_tree

    def zombie_children():
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                stat = open(f"/proc/{name}/stat", "rb").read()
            except OSError:
                continue
            state, ppid = stat[stat.rfind(b")") + 2 :].split(b" ")[:2]
            if state == b"Z" and int(ppid) == os.getpid():
                found.append(int(name))
        return found

    async def main():
        process_tree.adopt_orphans()
        if sys.argv[1] == "no-reap":
            async def keep(pids, within_secs=5.0):
                return None
            process_tree.reap = keep
        shell = await asyncio.create_subprocess_exec(
            "sh", "-c", "setsid sleep 300 & echo started; wait",
            stdout=asyncio.subprocess.PIPE, start_new_session=True,
        )
        await shell.stdout.readline()
        while len(process_tree.descendants(shell.pid)) < 1:
            await asyncio.sleep(0.01)
        escaped = process_tree.descendants(shell.pid)
        await process_tree.end_group(shell.pid, shell.wait)
        alive = [pid for pid in escaped if pid in process_tree.descendants(os.getpid())]
        if sys.argv[1] == "no-reap":  # killed, it becomes a zombie once the kernel ends it
            while not zombie_children():
                await asyncio.sleep(0.01)
        print(len(alive), len(zombie_children()))

    asyncio.run(main())
    """
)


def run(mode: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    alive, zombies = done.stdout.split()
    return int(alive), int(zombies)


def test_what_left_the_group_is_killed_and_reaped() -> None:
    assert run("reap") == (0, 0)


def test_without_reaping_the_adopted_sleep_stays_a_zombie() -> None:
    # The control: the same run, its reaping switched off, leaves the zombie behind.
    assert run("no-reap") == (0, 1)
