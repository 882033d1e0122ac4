"""The launch receipt is keyed on what the config and key checks read, nothing more: a
new terminal or tmux pane still hits, a changed config or key variable misses."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from codewhale.config import ConfigError, load_config
from codewhale.providers.presets import PRESETS
from codewhale.tui.launch import check
from codewhale.tui.launch_receipt import (
    CHECKED_PREFIXES,
    KEY_VARIABLES,
    Appearance,
)

# What terminals and multiplexers set per window or pane; no setting comes from them.
TERMINAL_VARIABLES = {
    "TMUX": "/tmp/tmux-0/default,4242,1",
    "TMUX_PANE": "%7",
    "WINDOWID": "73400327",
    "TERM_SESSION_ID": "w0t1p0:6F1C",
    "SHLVL": "3",
}


def launch_args(workspace: Path, **values) -> argparse.Namespace:
    return argparse.Namespace(
        **{"workspace_path": workspace, "overrides": {}, "resume": None} | values
    )


@pytest.fixture
def checked_once(isolated_home, monkeypatch, tmp_path):
    """A workspace whose checks have just passed once (a key set, no offline fallback)."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-receipt-0000000000")
    config = isolated_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("offline_fallback = false\n")
    workspace = tmp_path / "repo"
    workspace.mkdir()
    assert not isinstance(check(launch_args(workspace)), Appearance)  # a first start: checked
    return workspace


def test_a_start_in_another_terminal_or_tmux_pane_hits_the_receipt(checked_once, monkeypatch):
    for name, value in TERMINAL_VARIABLES.items():
        monkeypatch.setenv(name, value)
    assert isinstance(check(launch_args(checked_once)), Appearance)
    monkeypatch.setenv("TMUX_PANE", "%8")  # the pane beside it
    assert isinstance(check(launch_args(checked_once)), Appearance)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CODEWHALE_MODEL", "deepseek-v4-flash"),
        ("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/v1"),
        ("CODEWHALE_API_KEY", "sk-other-00000000000"),
        ("OPENAI_API_KEY", "sk-openai-0000000000"),
    ],
)
def test_a_changed_config_or_key_variable_checks_again(checked_once, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    checked = check(launch_args(checked_once))
    assert not isinstance(checked, Appearance)
    assert checked.config.provider == "deepseek"  # read and validated afresh: a LoadedConfig


def test_a_changed_config_file_checks_again(checked_once, isolated_home):
    (isolated_home / "config" / "config.toml").write_text(
        'offline_fallback = false\nmodel = "deepseek-v4-flash"\n'
    )
    checked = check(launch_args(checked_once))
    assert not isinstance(checked, Appearance)
    assert checked.config.model == "deepseek-v4-flash"


class Recording(Mapping[str, str]):
    """An environment that remembers every name looked up in it."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.read.add(name)
        return self.values[name]

    def get(self, name: str, default=None):  # type: ignore[override]
        self.read.add(name)
        return self.values.get(name, default)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.read.add(name)
        return name in self.values

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the config loader must not depend on the whole environment")

    def __len__(self) -> int:
        return len(self.values)


@pytest.mark.parametrize("provider", sorted(PRESETS))
def test_the_receipt_keys_on_every_variable_the_config_loader_reads(isolated_home, provider):
    env = Recording({"CODEWHALE_HOME": str(isolated_home)})
    # What it read before refusing (the offline model missing, say) counts as much.
    with contextlib.suppress(ConfigError):
        load_config(workspace=isolated_home, overrides={"provider": provider}, env=env)
    unkeyed = {n for n in env.read if not n.startswith(CHECKED_PREFIXES) and n not in KEY_VARIABLES}
    assert env.read and not unkeyed, sorted(unkeyed)
