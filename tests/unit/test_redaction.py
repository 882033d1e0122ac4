"""Secrets out of tool output: what the Redactor replaces, which secrets a session gathers,
and that the dispatcher hands on only redacted results (model, handles, screen)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from codewhale.config import load_config
from codewhale.config_models import SandboxConfig
from codewhale.engine import events
from codewhale.engine.dispatch import LARGE_OUTPUT_CHARS, ToolDispatcher
from codewhale.permissions import Mode, ModeSwitch
from codewhale.providers.types import ToolCall
from codewhale.redaction import Redactor, environment_secrets, named_secrets
from codewhale.runtime.redactor import session_redactor
from codewhale.tools.base import Tool, ToolContext, ToolResult
from codewhale.tools.registry import ToolRegistry, default_tools

KEY = "sk-canary-0c5be9d4a1"


def test_each_secret_is_replaced_whole_as_written_and_json_escaped():
    password = 'pa"ss\\word-99'
    redactor = Redactor([KEY, "0c5be9d4", password, "short"])
    text = f"key={KEY} part=0c5be9d4 json={json.dumps({'p': password})} short"
    assert redactor.redact(text) == (
        'key=[redacted] part=[redacted] json={"p": "[redacted]"} short'
    )


def test_a_redactor_without_secrets_changes_nothing():
    text = "nothing to hide"
    assert not Redactor(["", "1", "   "])
    assert Redactor().redact(text) is text


def test_the_environment_gives_its_secret_looking_values_but_no_paths_or_names(tmp_path):
    environ = {
        "GITHUB_TOKEN": "ghp_0123456789abcdef",
        "MY_PASSWORD": "correct horse battery",
        "SSH_AUTH_SOCK": str(tmp_path),  # an existing path: no secret
        "GIT_AUTHOR_NAME": "Jane Example",  # 'author' is not 'auth'
        "PATH": "/usr/bin:/bin",
    }
    assert environment_secrets(environ) == ["ghp_0123456789abcdef", "correct horse battery"]


def test_a_bearer_header_gives_its_credential_alone_too():
    headers = {"Authorization": "Bearer tok-0123456789", "X-Trace": "not-a-secret"}
    assert named_secrets(headers) == ["Bearer tok-0123456789", "tok-0123456789"]


def test_a_session_gathers_its_key_headers_environment_and_mcp_secrets(tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(
        'api_key = "sk-from-user-config-42"\n'
        'headers = { "X-Api-Key" = "header-secret-1234" }\n'
        "[mcp.servers.svc]\n"
        'command = "svc"\n'
        'env = { SERVICE_TOKEN = "${PLAIN_NAME}" }\n'
    )
    environ = {
        "CODEWHALE_HOME": str(home),
        "OPENAI_API_KEY": "sk-another-provider-77",  # not the one in use, still redacted
        "PLAIN_NAME": "mcp-secret-via-plain-var",  # a secret only through the MCP config
    }
    loaded = load_config(workspace=tmp_path, env=environ)
    redactor = session_redactor(loaded, tmp_path, environ)
    secrets = [
        "sk-from-user-config-42",
        "header-secret-1234",
        "sk-another-provider-77",
        "mcp-secret-via-plain-var",
    ]
    assert redactor.redact(" ".join(secrets)) == " ".join(["[redacted]"] * 4)


class Leaky(Tool):
    """Prints the key amid a long output, and shows it on screen too."""

    name = "leaky"
    description = "test tool"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        filler = "x" * LARGE_OUTPUT_CHARS
        return ToolResult(f"{KEY}\n{filler}\n{KEY}", display=f"shown: {KEY}")


async def test_the_dispatcher_redacts_the_result_the_handle_and_what_is_shown(tmp_path):
    context = ToolContext(workspace=tmp_path, session_id="s", redactor=Redactor([KEY]))
    seen: list[events.Event] = []
    dispatcher = ToolDispatcher(ToolRegistry([Leaky()]), context, seen.append)
    [outcome] = await dispatcher.run([ToolCall("1", "leaky", "{}")])
    # Too long for the message: the head goes to the model, the whole into a handle.
    assert outcome.result.output.startswith("[redacted]\nxxx")
    handle = json.loads(outcome.result.output.rsplit("\n", 1)[1])
    tail = {"start": LARGE_OUTPUT_CHARS, "end": 2 * LARGE_OUTPUT_CHARS}
    stored = json.dumps(context.handles.read({"handle": handle, "slice": tail}))
    assert stored.count("[redacted]") == 1 and KEY not in stored
    [finished] = [e for e in seen if isinstance(e, events.ToolCallFinished)]
    assert finished.display == "shown: [redacted]"
    assert KEY not in finished.output_preview


async def test_a_variable_passed_to_a_shell_command_comes_back_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", KEY)
    context = ToolContext(
        workspace=tmp_path,
        session_id="s",
        modes=ModeSwitch(Mode.YOLO),
        redactor=Redactor(environment_secrets({"DEPLOY_TOKEN": KEY})),
    )
    tools = ToolRegistry(default_tools(SandboxConfig(pass_env=["DEPLOY_TOKEN"])))
    dispatcher = ToolDispatcher(tools, context, lambda event: None)
    call = ToolCall("1", "exec_shell", json.dumps({"command": "printenv DEPLOY_TOKEN"}))
    [outcome] = await dispatcher.run([call])
    assert outcome.result.ok and "[redacted]" in outcome.result.output
    assert KEY not in outcome.result.output


async def test_an_approval_preview_shows_no_secret_of_the_file_it_changes(tmp_path):
    """The dry-run diff quotes the file as it is; the dialog and `exec --json` get it."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(f'{{"token": "{KEY}"}}\n')
    context = ToolContext(workspace=tmp_path, session_id="s", redactor=Redactor([KEY]))
    asked: list[events.ApprovalRequested] = []

    def deny(event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            asked.append(event)
            event.resolve("deny")

    edit = {"path": ".claude/settings.json", "old_string": "token", "new_string": "t"}
    call = ToolCall("1", "edit_file", json.dumps(edit))
    # A protected file: the edit asks, with the diff of the file as it is.
    await ToolDispatcher(ToolRegistry(default_tools()), context, deny).run([call])
    [request] = asked
    assert '-{"token": "[redacted]"}' in request.preview and KEY not in request.preview
