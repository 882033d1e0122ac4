"""`codewhale exec` under locales whose output encoding lacks the answer's characters
(issue 29): the answer is printed, never lost to a UnicodeEncodeError."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY, app_environment

ANSWER = "Café prêt 🐳 — 读 done"
LOCALES = [
    pytest.param({"PYTHONIOENCODING": "ascii"}, id="PYTHONIOENCODING=ascii"),
    pytest.param({"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}, id="LC_ALL=C"),
    pytest.param({"LC_ALL": "POSIX", "PYTHONUTF8": "0"}, id="LC_ALL=POSIX"),
]


def run_exec(llm, tmp_path, locale: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    for name in ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8"):
        env.pop(name, None)
    env.update(locale)
    # Bytes: the test reads what the process wrote, not what a decoder makes of it.
    return subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), *args, "say it"],
        capture_output=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize("locale", LOCALES)
def test_text_output_replaces_what_the_locale_cannot_encode(llm, tmp_path, locale):
    llm.enqueue(Reply(text=ANSWER))
    result = run_exec(llm, tmp_path, locale)
    stderr = result.stderr.decode("ascii", "replace")
    assert result.returncode == 0, stderr
    assert "Traceback" not in stderr and "UnicodeEncodeError" not in stderr
    assert result.stdout.decode("ascii").strip() == "Caf? pr?t ? ? ? done"


@pytest.mark.parametrize("locale", LOCALES)
def test_json_output_escapes_so_every_character_arrives_exactly(llm, tmp_path, locale):
    llm.enqueue(Reply(text=ANSWER))
    result = run_exec(llm, tmp_path, locale, "--json")
    assert result.returncode == 0, result.stderr.decode("ascii", "replace")
    lines = result.stdout.decode("ascii").splitlines()  # pure ASCII: escaped, not replaced
    finals = [r["final_text"] for r in map(json.loads, lines) if r.get("type") == "turn_complete"]
    assert finals == [ANSWER]
