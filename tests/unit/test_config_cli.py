"""`codewhale config ...` as a user runs it: real subprocesses, real files."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

import pytest

from tests.support.settings import app_environment

KEY = "sk-test-1234567890abcdef"


@pytest.fixture
def run(tmp_path):
    home = tmp_path / "home"
    workspace = tmp_path / "repo"
    workspace.mkdir()

    def run(*args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        env = app_environment(CODEWHALE_HOME=str(home), DEEPSEEK_API_KEY=KEY, **extra_env)
        return subprocess.run(
            [sys.executable, "-m", "codewhale", "-C", str(workspace), "config", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )

    run.home = home
    run.workspace = workspace
    return run


def test_show_redacts_the_key_and_names_sources(run):
    result = run("show")
    assert result.returncode == 0, result.stderr
    assert KEY not in result.stdout + result.stderr
    assert 'api_key = "sk-…cdef"' in result.stdout
    assert "# env DEEPSEEK_API_KEY" in result.stdout
    assert "[subagents]" in result.stdout


def test_show_json_is_machine_readable_and_redacted(run):
    result = run("show", "--json", "--model", "deepseek-v4-flash")
    assert result.returncode == 0, result.stderr
    assert KEY not in result.stdout
    document = json.loads(result.stdout)
    assert document["values"]["api_key"] == "sk-…cdef"
    assert document["values"]["model"] == "deepseek-v4-flash"
    assert document["sources"]["model"] == "flag --model"
    assert document["values"]["subagents"]["max_concurrent"] == 20
    assert document["files"]["project"] == str(run.workspace / ".codewhale" / "config.toml")


def test_secret_headers_are_redacted(run):
    config = run.home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[headers]\nX-Api-Token = "tok-abcdefghijklmnop"\nX-Team = "a"\n')
    result = run("show", "--json")
    headers = json.loads(result.stdout)["values"]["headers"]
    assert headers == {"X-Api-Token": "…mnop", "X-Team": "a"}


def test_init_writes_a_private_file_once(run):
    first = run("init")
    assert first.returncode == 0, first.stderr
    path = run.home / "config" / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert 'provider = "deepseek"' in path.read_text()
    path.write_text(path.read_text() + "# mine\n")
    second = run("init")
    assert second.returncode == 1
    assert "already exists" in second.stderr and "--force" in second.stderr
    assert path.read_text().endswith("# mine\n")
    assert run("init", "--force").returncode == 0
    assert "# mine" not in path.read_text()


def test_path_lists_every_location(run):
    result = run("path")
    assert result.returncode == 0
    assert str(run.home / "config" / "config.toml") in result.stdout
    assert str(run.workspace / ".codewhale" / "config.toml") in result.stdout
    for label in ("data dir", "state dir", "cache dir"):
        assert label in result.stdout


def test_malformed_config_is_a_clear_error_without_traceback(run):
    path = run.home / "config" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("[subagents]\nmax_concurrent = 'many'\n")
    result = run("show")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{path}, line 2: subagents.max_concurrent: expected an integer" in result.stderr


def test_bare_config_prints_usage(run):
    result = run()
    assert result.returncode == 2
    assert "show" in result.stderr and "init" in result.stderr


def test_init_writes_the_annotated_example_that_config_example_prints(run):
    printed = run("example")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith("# CodeWhale configuration: every key with its default.")
    assert run("init").returncode == 0
    written = (run.home / "config" / "config.toml").read_text()
    assert written == printed.stdout
    # Loaded as written, it is the defaults: nothing to warn about, nothing changed.
    shown = run("show", "--json")
    assert shown.returncode == 0 and "warning" not in shown.stderr, shown.stderr
