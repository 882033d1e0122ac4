"""`codewhale exec` edits a Latin-1 CRLF file the way a model does, and only the asked
bytes change: a real subprocess against the loopback LLM."""

from __future__ import annotations

import subprocess
import sys

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment

BEFORE = "# prix en €uros? non: en francs\r\ncafé = 1\r\nthé = 2".encode("cp1252")
AFTER = "# prix en €uros? non: en francs\r\ncafé = 3\r\nthé = 2".encode("cp1252")


def test_exec_edits_a_windows_1252_crlf_file_byte_for_byte(llm, tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "prices.py").write_bytes(BEFORE)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "prices.py"})]),
        # Copied from what read_file showed: the accented text, with "\n" line breaks.
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "edit_file",
                    {"path": "prices.py", "old_string": "café = 1\n", "new_string": "café = 3\n"},
                )
            ]
        ),
        Reply(text="Done."),
    )
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]
    result = subprocess.run(
        [*command, "--approve", "auto", "set the price of coffee to 3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (workspace / "prices.py").read_bytes() == AFTER
    shown = next(m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool")
    assert shown.splitlines() == [
        "1\t# prix en €uros? non: en francs",
        "2\tcafé = 1",
        "3\tthé = 2",
        "[shown as Windows-1252: the file is not valid UTF-8; edits keep its encoding]",
    ]
