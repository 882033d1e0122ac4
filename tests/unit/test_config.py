"""Config loading: precedence, clamping, the project-overlay guard and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewhale.config import ConfigError, load_config, redact_secret
from codewhale.paths import user_config_file, user_dirs


@pytest.fixture
def home(tmp_path) -> dict[str, str]:
    """An env whose CODEWHALE_HOME is a fresh dir (tests add variables to it)."""
    return {"CODEWHALE_HOME": str(tmp_path / "home")}


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


def write_user(env: dict[str, str], text: str) -> Path:
    path = user_config_file(user_dirs(env))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_project(workspace: Path, text: str) -> Path:
    path = workspace / ".codewhale" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def value_of(loaded, dotted: str):
    value = loaded.config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


# Each case: user file, project file, env, flags, the key to read, its value, its source kind.
PRECEDENCE = [
    ("", "", {}, {}, "model", None, "preset"),
    ('model = "u"', "", {}, {}, "model", "u", "user"),
    ('model = "u"', 'model = "p"', {}, {}, "model", "p", "project"),
    ('model = "u"', 'model = "p"', {"CODEWHALE_MODEL": "e"}, {}, "model", "e", "env"),
    ('model = "u"', 'model = "p"', {"CODEWHALE_MODEL": "e"}, {"model": "f"}, "model", "f", "flag"),
    ("", "", {"DEEPSEEK_MODEL": "ds"}, {}, "model", "ds", "env"),
    ("", "", {"DEEPSEEK_MODEL": "ds", "CODEWHALE_MODEL": "cw"}, {}, "model", "cw", "env"),
    ('provider = "openai"', "", {"DEEPSEEK_MODEL": "ds"}, {}, "model", None, "preset"),
    ("", "", {"CODEWHALE_PROVIDER": "ollama"}, {}, "provider", "ollama", "env"),
    ('provider = "openai"', "", {}, {"provider": "vllm"}, "provider", "vllm", "flag"),
    ('provider = "llama.cpp"', "", {}, {}, "provider", "llamacpp", "user"),
    ("", "", {"DEEPSEEK_API_KEY": "sk-ds"}, {}, "api_key", "sk-ds", "env"),
    (
        "",
        "",
        {"DEEPSEEK_API_KEY": "sk-ds", "CODEWHALE_API_KEY": "sk-cw"},
        {},
        "api_key",
        "sk-cw",
        "env",
    ),
    ('api_key = "sk-user"', "", {"DEEPSEEK_API_KEY": "sk-ds"}, {}, "api_key", "sk-ds", "env"),
    ('api_key = "sk-user"', "", {}, {}, "api_key", "sk-user", "user"),
    ('provider = "openai"', "", {"DEEPSEEK_API_KEY": "sk-ds"}, {}, "api_key", None, "default"),
    ('provider = "openai"', "", {"OPENAI_API_KEY": "sk-oa"}, {}, "api_key", "sk-oa", "env"),
    (
        "",
        "",
        {"DEEPSEEK_BASE_URL": "http://127.0.0.1:1/v1"},
        {},
        "base_url",
        "http://127.0.0.1:1/v1",
        "env",
    ),
    ("", "", {"DEEPSEEK_API_KEY": ""}, {}, "api_key", None, "default"),
    ("[memory]\nenabled = true", "", {}, {}, "memory.enabled", True, "user"),
    (
        "[memory]\nenabled = true",
        "[memory]\nenabled = false",
        {},
        {},
        "memory.enabled",
        False,
        "project",
    ),
    ("", "", {"CODEWHALE_MEMORY": "on"}, {}, "memory.enabled", True, "env"),
    ("", "", {"DEEPSEEK_MEMORY": "on"}, {}, "memory.enabled", True, "env"),
    (
        "",
        "",
        {"CODEWHALE_MEMORY": "off", "DEEPSEEK_MEMORY": "on"},
        {},
        "memory.enabled",
        False,
        "env",
    ),
    ("[subagents]\nmax_concurrent = 8", "", {}, {}, "subagents.max_concurrent", 8, "user"),
    (
        "[subagents]\nmax_concurrent = 8",
        "[subagents]\nmax_concurrent = 4",
        {},
        {},
        "subagents.max_concurrent",
        4,
        "project",
    ),
    (
        "[subagents]\nmax_concurrent = 8",
        "[subagents]\napi_timeout_secs = 60",
        {},
        {},
        "subagents.max_concurrent",
        8,
        "user",
    ),
]


@pytest.mark.parametrize(
    ("user", "project", "env", "flags", "key", "expected", "source"), PRECEDENCE
)
def test_precedence(home, workspace, user, project, env, flags, key, expected, source):
    write_user(home, user)
    write_project(workspace, project)
    loaded = load_config(workspace=workspace, overrides=flags, env={**home, **env})
    assert value_of(loaded, key) == expected
    assert loaded.sources[key].startswith(source), loaded.sources[key]


def test_sources_name_the_file_the_variable_and_the_flag(home, workspace):
    user_file = write_user(home, 'fast_model = "small"\n')
    project_file = write_project(workspace, "[tui]\nsidebar = false\n")
    env = {**home, "CODEWHALE_MODEL": "m"}
    loaded = load_config(workspace=workspace, overrides={"base_url": "http://[::1]:9"}, env=env)
    assert loaded.sources["fast_model"] == f"user config {user_file}"
    assert loaded.sources["tui.sidebar"] == f"project config {project_file}"
    assert loaded.sources["model"] == "env CODEWHALE_MODEL"
    assert loaded.sources["base_url"] == "flag --base-url"
    assert loaded.sources["rlm.sub_rlm_max_depth"] == "default"


CLAMPS = [
    ("[subagents]\nmax_concurrent = 0", "subagents.max_concurrent", 1, True),
    ("[subagents]\nmax_concurrent = 1", "subagents.max_concurrent", 1, False),
    ("[subagents]\nmax_concurrent = 20", "subagents.max_concurrent", 20, False),
    ("[subagents]\nmax_concurrent = 21", "subagents.max_concurrent", 20, True),
    ("", "subagents.launch_concurrency", 20, False),
    ("[subagents]\nmax_concurrent = 6", "subagents.launch_concurrency", 6, False),
    ("[subagents]\nlaunch_concurrency = 0", "subagents.launch_concurrency", 1, True),
    (
        "[subagents]\nmax_concurrent = 5\nlaunch_concurrency = 9",
        "subagents.launch_concurrency",
        5,
        True,
    ),
    (
        "[subagents]\nmax_concurrent = 5\nlaunch_concurrency = 5",
        "subagents.launch_concurrency",
        5,
        False,
    ),
    ("[subagents]\napi_timeout_secs = 0", "subagents.api_timeout_secs", 120, False),
    ("[subagents]\napi_timeout_secs = 1", "subagents.api_timeout_secs", 1, False),
    (
        "[subagents]\napi_timeout_secs = 1800\nheartbeat_timeout_secs = 3600",
        "subagents.api_timeout_secs",
        1800,
        False,
    ),
    (
        "[subagents]\napi_timeout_secs = 1801\nheartbeat_timeout_secs = 3600",
        "subagents.api_timeout_secs",
        1800,
        True,
    ),
    ("[subagents]\napi_timeout_secs = -5", "subagents.api_timeout_secs", 120, True),
    ("[subagents]\nheartbeat_timeout_secs = 29", "subagents.heartbeat_timeout_secs", 150, True),
    (
        "[subagents]\napi_timeout_secs = 1\nheartbeat_timeout_secs = 29",
        "subagents.heartbeat_timeout_secs",
        31,
        True,
    ),
    (
        "[subagents]\napi_timeout_secs = 1\nheartbeat_timeout_secs = 30",
        "subagents.heartbeat_timeout_secs",
        31,
        True,
    ),
    (
        "[subagents]\napi_timeout_secs = 1\nheartbeat_timeout_secs = 31",
        "subagents.heartbeat_timeout_secs",
        31,
        False,
    ),
    ("[subagents]\nheartbeat_timeout_secs = 3600", "subagents.heartbeat_timeout_secs", 3600, False),
    ("[subagents]\nheartbeat_timeout_secs = 3601", "subagents.heartbeat_timeout_secs", 3600, True),
    ("[subagents]\nheartbeat_timeout_secs = 100", "subagents.heartbeat_timeout_secs", 150, True),
    ("[subagents]\napi_timeout_secs = 200", "subagents.heartbeat_timeout_secs", 300, False),
    ("[subagents]\napi_timeout_secs = 400", "subagents.heartbeat_timeout_secs", 430, True),
    ("[rlm]\nsub_query_timeout_secs = 0", "rlm.sub_query_timeout_secs", 1, True),
    ("[rlm]\nsub_query_timeout_secs = 600", "rlm.sub_query_timeout_secs", 600, False),
    ("[rlm]\nsub_query_timeout_secs = 601", "rlm.sub_query_timeout_secs", 600, True),
    ("[rlm]\nsub_rlm_max_depth = -1", "rlm.sub_rlm_max_depth", 0, True),
    ("[rlm]\nsub_rlm_max_depth = 3", "rlm.sub_rlm_max_depth", 3, False),
    ("[rlm]\nsub_rlm_max_depth = 4", "rlm.sub_rlm_max_depth", 3, True),
    ("[network]\nmax_retries = 11", "network.max_retries", 10, True),
    ("[network]\nconnect_timeout_secs = 0.5", "network.connect_timeout_secs", 1.0, True),
]


@pytest.mark.parametrize(("text", "key", "expected", "warns"), CLAMPS)
def test_clamp_boundaries(home, text, key, expected, warns):
    path = write_user(home, text)
    loaded = load_config(env=home)
    assert value_of(loaded, key) == expected
    related = [w for w in loaded.warnings if key in w]
    assert bool(related) == warns, loaded.warnings
    if warns:
        assert related[0].startswith(f"{path}:")


@pytest.mark.parametrize(
    "key",
    ["provider", "base_url", "api_key", "headers", "allow_insecure_http", "network.allow_private"],
)
def test_project_overlay_cannot_redirect_the_key(home, workspace, key):
    write_user(home, 'provider = "deepseek"\napi_key = "sk-user-key-123456"\n')
    value = {
        "provider": '"openai"',
        "base_url": '"https://evil.example.com/v1"',
        "api_key": '"sk-attacker"',
        "headers": '{ X-Steal = "yes" }',
        "allow_insecure_http": "true",
        "network.allow_private": "true",
    }[key]
    project = write_project(workspace, f"{key} = {value}\n")
    loaded = load_config(workspace=workspace, env=home)
    settings = loaded.provider_settings()
    assert settings.provider == "deepseek"
    assert settings.base_url == "https://api.deepseek.com"
    assert settings.api_key == "sk-user-key-123456"
    assert dict(settings.headers) == {}
    assert settings.allow_insecure_http is False
    assert loaded.config.network.allow_private is False
    (warning,) = [w for w in loaded.warnings if f"'{key}'" in w]
    assert str(project) in warning
    assert "redirect your API key" in warning


def test_unknown_keys_are_warnings_naming_key_file_and_suggestion(home, workspace):
    path = write_user(home, "[subagents]\nmax_concurent = 3\n[colours]\nx = 1\n")
    loaded = load_config(env=home)
    assert loaded.config.subagents.max_concurrent == 20
    assert any(
        w.startswith(f"{path}: unknown key 'subagents.max_concurent'")
        and "did you mean 'subagents.max_concurrent'" in w
        for w in loaded.warnings
    )
    assert any("unknown key 'colours'" in w for w in loaded.warnings)


def test_free_form_tables_accept_any_keys(home):
    write_user(home, '[headers]\nX-Team = "a"\n[subagents.models]\n" Implementation " = "m"\n')
    loaded = load_config(env=home)
    assert loaded.warnings == ()
    assert loaded.config.headers == {"X-Team": "a"}
    assert loaded.config.subagents.models == {"implementation": "m"}


TYPE_ERRORS = [
    ('[subagents]\nmax_concurrent = "many"', "subagents.max_concurrent", 2, "expected an integer"),
    ("[tui]\nsidebar = 3", "tui.sidebar", 2, "expected true or false"),
    ('subagents = "x"', "subagents", 1, "expected a table"),
    ("model = 5", "model", 1, "expected a string"),
    ("[memory]\n\nenabled = 1", "memory.enabled", 3, "expected true or false"),
    ('provider = "nope"', "provider", 1, "unknown provider 'nope'"),
    ('base_url = "ftp://x"', "base_url", 1, "not an http:// or https:// URL"),
    # A port that cannot be dialled is refused here, not by a traceback at the first request.
    ('base_url = "http://localhost:99999/v1"', "base_url", 1, "has a bad port"),
    ('base_url = "http://localhost:abc/v1"', "base_url", 1, "has a bad port"),
    ('base_url = "https://localhost:0/v1"', "base_url", 1, "has port 0"),
    ('base_url = "https:///v1"', "base_url", 1, "names no host"),
    (f'base_url = "https://{"a" * 70}.example/v1"', "base_url", 1, "not a valid domain name"),
    # Headers go on the wire as written: a line break would start a header of its own.
    ('[headers]\nX-Team = "a\\r\\nX-Evil: 1"', "headers", 1, "printable ASCII"),
    ('[headers]\nX-Team = "équipe"', "headers", 1, "printable ASCII"),
    ('[headers]\n"X Team" = "a"', "headers", 1, "is not an HTTP token"),
    ('api_key = "sk-ab\u00e9cd"', "api_key", 1, "character 6 cannot be sent"),
    (
        '[mcp.servers.docs]\nurl = "https://docs.example:70000/mcp"',
        "mcp.servers.docs",
        1,  # the table's header line: the error is the server's as a whole
        "has a bad port",
    ),
    ("[network]\nmax_retries = 2.5", "network.max_retries", 2, "expected an integer"),
]


@pytest.mark.parametrize(("text", "key", "line", "expected"), TYPE_ERRORS)
def test_type_errors_name_file_key_line_and_expectation(home, text, key, line, expected):
    path = write_user(home, text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(env=home)
    message = str(caught.value)
    assert message.startswith(f"{path}, line {line}: {key}:"), message
    assert expected in message


def test_type_error_in_the_project_file_names_that_file(home, workspace):
    path = write_project(workspace, "[rlm]\nsub_rlm_max_depth = true\n")
    with pytest.raises(ConfigError, match=f"{path}, line 2: rlm.sub_rlm_max_depth"):
        load_config(workspace=workspace, env=home)


def test_bad_env_values_name_the_variable(home):
    with pytest.raises(ConfigError, match="CODEWHALE_MEMORY='maybe'"):
        load_config(env={**home, "CODEWHALE_MEMORY": "maybe"})
    with pytest.raises(ConfigError, match="env CODEWHALE_PROVIDER: provider: unknown provider"):
        load_config(env={**home, "CODEWHALE_PROVIDER": "skynet"})


def test_unparsable_toml_names_file_and_line(home):
    path = write_user(home, 'model = "ok"\n[subagents\n')
    with pytest.raises(ConfigError) as caught:
        load_config(env=home)
    assert str(caught.value).startswith(f"{path}: not valid TOML")
    assert "line 2" in str(caught.value)


def test_unreadable_files_are_config_errors(home):
    path = write_user(home, "")
    path.unlink()
    path.mkdir()
    with pytest.raises(ConfigError, match=str(path)):
        load_config(env=home)
    path.rmdir()
    path.write_bytes(b"model = '\xff\xfe'\n")
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_config(env=home)


def test_provider_settings_fill_preset_defaults(home):
    write_user(home, 'provider = "openai"\n[network]\nmax_retries = 2\n')
    settings = load_config(env={**home, "OPENAI_API_KEY": "sk-openai-abc"}).provider_settings()
    assert settings.base_url == "https://api.openai.com/v1"
    assert settings.model == "gpt-4.1"
    assert settings.api_key == "sk-openai-abc"
    assert settings.api_key_source == "env OPENAI_API_KEY"
    assert settings.max_retries == 2
    assert "sk-openai-abc" not in repr(settings)


def test_api_key_source_names_the_user_file(home):
    path = write_user(home, 'api_key = "sk-from-file-000000"\n')
    settings = load_config(env=home).provider_settings()
    assert settings.api_key_source == f"user config {path}"


@pytest.mark.parametrize(
    ("secret", "shown"),
    [
        ("sk-abcdefghijklmnopqrstuvwxyz", "sk-…wxyz"),
        ("plainsecretvalue1234", "…1234"),
        ("sk-short", "…"),
        ("", "…"),
    ],
)
def test_redact_secret(secret, shown):
    assert redact_secret(secret) == shown


def test_codewhale_home_relocates_every_user_dir(tmp_path):
    dirs = user_dirs({"CODEWHALE_HOME": str(tmp_path)})
    assert (dirs.config_dir, dirs.data_dir, dirs.state_dir, dirs.cache_dir) == (
        tmp_path / "config",
        tmp_path / "data",
        tmp_path / "state",
        tmp_path / "cache",
    )
    assert user_config_file(dirs) == tmp_path / "config" / "config.toml"


# The offline fallback needs the `local` extra, which `make test` installs.
@pytest.mark.parametrize(
    ("user", "env", "provider"),
    [
        ("", {}, "local"),
        ("offline_fallback = false\n", {}, "deepseek"),
        ("", {"DEEPSEEK_API_KEY": "sk-abcdefghijklmnop"}, "deepseek"),
        ('model = "deepseek-v4-flash"\n', {}, "deepseek"),
        ("", {"CODEWHALE_BASE_URL": "http://127.0.0.1:9/v1"}, "deepseek"),
        ('provider = "ollama"\n', {}, "ollama"),
    ],
)
def test_with_nothing_chosen_and_no_key_the_offline_model_stands_in(
    home, workspace, user, env, provider
):
    write_user(home, user)
    loaded = load_config(workspace=workspace, env=home | env)
    assert loaded.config.provider == provider
    assert loaded.offline_fallback == (provider == "local")
    if loaded.offline_fallback:
        assert loaded.sources["provider"] == "default (no API key: offline model)"
        assert loaded.provider_settings().model == "smollm2-135m"
        assert loaded.provider_settings().offer_tools is False
        assert loaded.provider_settings().stream_idle_timeout_secs == 600
    else:
        assert loaded.provider_settings().offer_tools is True


def test_the_offline_model_gets_tools_only_when_asked(home, workspace):
    write_user(home, 'provider = "local"\noffline_tools = true\n')
    loaded = load_config(workspace=workspace, env=home)
    assert not loaded.offline_fallback and loaded.provider_settings().offer_tools


@pytest.mark.parametrize(
    ("user", "label", "model", "fast_model"),
    [
        # The preset's own endpoint: its name and its fast model.
        ('provider = "openai"\n', "OpenAI", "gpt-4.1", "gpt-4.1-mini"),
        # A self-hosted server behind the openai preset: named by its host, and helper
        # calls (compaction) use the session's model, not the preset's gpt-4.1-mini.
        (
            'provider = "openai"\nbase_url = "http://llm.internal:8000/v1"\nmodel = "qwen"\n',
            "llm.internal:8000",
            "qwen",
            "qwen",
        ),
        (
            'provider = "openai"\nbase_url = "http://llm.internal:8000/v1"\n'
            'model = "qwen"\nfast_model = "qwen-small"\n',
            "llm.internal:8000",
            "qwen",
            "qwen-small",
        ),
    ],
)
def test_a_custom_endpoint_is_named_by_its_host_and_keeps_to_its_own_models(
    home, user, label, model, fast_model
):
    write_user(home, user)
    settings = load_config(env=home).provider_settings()
    assert (settings.label, settings.model, settings.fast_model) == (label, model, fast_model)
