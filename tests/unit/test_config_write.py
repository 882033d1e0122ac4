"""Saving settings keeps the user's config file: comments, order and other keys."""

from __future__ import annotations

import stat
import tomllib

from codewhale.config_write import update_config_file

COMMENTED = """\
# My CodeWhale settings — keep these notes.
provider = "deepseek"   # the default, written out on purpose

[network]
# slow office link
stream_idle_timeout_secs = 300

[tui]
theme = "nord"  # easier on the eyes
"""


def test_saving_a_key_keeps_every_comment_and_the_order(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(COMMENTED)
    update_config_file(path, {"api_key": "sk-new", "network": {"max_retries": 2}})
    text = path.read_text()
    for line in COMMENTED.splitlines():
        assert line in text  # nothing the user wrote is lost or reformatted
    assert text.index("[network]") < text.index("[tui]")
    data = tomllib.loads(text)
    assert data["api_key"] == "sk-new" and data["provider"] == "deepseek"
    assert data["network"] == {"stream_idle_timeout_secs": 300, "max_retries": 2}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_missing_file_is_created_and_a_value_replaced(tmp_path):
    path = tmp_path / "sub" / "config.toml"
    update_config_file(path, {"api_key": "sk-1"})
    update_config_file(path, {"api_key": "sk-2"})
    assert tomllib.loads(path.read_text()) == {"api_key": "sk-2"}
