"""`--effort` / `reasoning_effort` (issue 29): sent as each provider's API takes it,
never to one that does not, and said so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY, app_environment


def run_exec(llm, tmp_path, provider: str, *flags: str) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_API_KEY=TEST_KEY,
        CODEWHALE_PROVIDER=provider,
        CODEWHALE_BASE_URL=llm.base_url,
    )
    llm.enqueue(Reply(text="thought hard"))
    return subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), *flags, "think"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("provider", "field", "value"),
    [
        ("openai", "reasoning_effort", "high"),
        ("vllm", "reasoning_effort", "high"),
        ("openrouter", "reasoning", {"effort": "high"}),
    ],
)
def test_the_effort_goes_out_as_the_providers_api_takes_it(llm, tmp_path, provider, field, value):
    result = run_exec(llm, tmp_path, provider, "--effort", "high")
    assert result.returncode == 0, result.stderr
    assert llm.requests[0].json[field] == value
    assert "reasoning_effort is not sent" not in result.stderr


def test_a_provider_that_does_not_take_it_is_not_sent_it_and_the_user_is_told(llm, tmp_path):
    result = run_exec(llm, tmp_path, "deepseek", "--effort", "low")
    assert result.returncode == 0, result.stderr
    body = llm.requests[0].json
    assert "reasoning_effort" not in body and "reasoning" not in body
    assert "reasoning_effort is not sent to DeepSeek" in result.stderr


def test_unset_it_is_never_sent(llm, tmp_path):
    assert run_exec(llm, tmp_path, "openai").returncode == 0
    assert "reasoning_effort" not in llm.requests[0].json
