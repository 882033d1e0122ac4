"""Whatever a config file holds, loading gives a config or a ConfigError, nothing else."""

from __future__ import annotations

import tempfile
from pathlib import Path

import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codewhale.config import ConfigError, LoadedConfig, load_config

KNOWN_KEYS = {
    "": [
        "provider",
        "model",
        "fast_model",
        "base_url",
        "api_key",
        "headers",
        "allow_insecure_http",
    ],
    "network": [
        "connect_timeout_secs",
        "stream_idle_timeout_secs",
        "max_retries",
        "retry_deadline_secs",
    ],
    "subagents": [
        "max_concurrent",
        "launch_concurrency",
        "api_timeout_secs",
        "heartbeat_timeout_secs",
        "default_model",
        "worker_model",
        "models",
    ],
    "memory": ["enabled"],
    "rlm": ["child_model", "sub_query_timeout_secs", "sub_rlm_max_depth"],
    "tui": ["sidebar", "theme", "show_reasoning"],
}

scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(max_size=20),
    st.sampled_from(["deepseek", "openai", "llama.cpp", "https://x.test/v1", "http://[::1]:1"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
key_names = st.one_of(
    st.sampled_from([key for keys in KNOWN_KEYS.values() for key in keys]),
    st.text(min_size=1, max_size=10),
)


@st.composite
def documents(draw) -> str:
    """A TOML text: mostly structured tables of near-valid keys, sometimes garbage."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=80))
    document: dict = {}
    for section in draw(st.lists(st.sampled_from([*list(KNOWN_KEYS), "bogus"]), max_size=4)):
        table = draw(st.dictionaries(key_names, values, max_size=4))
        if section:
            document[section] = draw(st.one_of(st.just(table), values))
        else:
            document.update(table)
    return tomlkit.dumps(document)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(user=documents(), project=documents())
def test_any_toml_yields_a_config_or_a_config_error(user, project):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        env = {"CODEWHALE_HOME": str(root / "home")}
        user_file = root / "home" / "config" / "config.toml"
        user_file.parent.mkdir(parents=True)
        user_file.write_text(user, encoding="utf-8")
        project_file = root / "repo" / ".codewhale" / "config.toml"
        project_file.parent.mkdir(parents=True)
        project_file.write_text(project, encoding="utf-8")
        try:
            loaded = load_config(workspace=root / "repo", env=env)
        except ConfigError as error:
            assert str(error)
        else:
            assert isinstance(loaded, LoadedConfig)
            assert 1 <= loaded.config.subagents.max_concurrent <= 20
            assert 1 <= loaded.config.subagents.launch_concurrency <= 20
            loaded.provider_settings()
