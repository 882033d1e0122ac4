"""config.example.toml must load cleanly and document every key there is."""

from __future__ import annotations

import re
from pathlib import Path

from codewhale.config import known_keys, load_config
from codewhale.config_models import Config

EXAMPLE = Path(__file__).resolve().parents[2] / "codewhale" / "data" / "config.example.toml"


def test_example_loads_without_warnings(tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(EXAMPLE.read_text())
    loaded = load_config(env={"CODEWHALE_HOME": str(home)})
    assert loaded.warnings == ()
    assert loaded.config == Config()


def test_example_mentions_every_key():
    text = EXAMPLE.read_text()
    for dotted in known_keys(Config):
        key = dotted.rsplit(".", 1)[-1]
        table = dotted.rsplit(".", 1)[0] if "." in dotted else None
        assert re.search(rf"^#?\s*{key}\b|^\[{re.escape(dotted)}\]", text, re.M), dotted
        if table:
            assert f"[{table}]" in text, table
