"""The real llama.cpp server on the bundled model, for tests marked `localmodel`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from codewhale.providers.local_model import MODEL_ALIAS, bundled_model_file, missing_local_runtime
from codewhale.providers.local_server import LocalServer, child_env
from codewhale.providers.presets import preset_for
from codewhale.providers.settings import ProviderSettings


def require_local_model() -> Path:
    """The model file; a clear failure (not a skip) when the extra is missing."""
    missing = missing_local_runtime()
    model = bundled_model_file()
    if missing or model is None:
        pytest.fail(f"{missing} (`make test` installs it)")
    return model


def local_settings(base_url: str = "", **overrides) -> ProviderSettings:
    preset = preset_for("local")
    values = {
        "provider": "local",
        "label": preset.label,
        "base_url": base_url,
        "model": MODEL_ALIAS,
        "fast_model": MODEL_ALIAS,
        "connect_timeout_secs": 5.0,
        "stream_idle_timeout_secs": 120.0,
        "max_retries": 0,
    } | overrides
    return ProviderSettings(**values)


def make_server(log_dir: Path, **options) -> LocalServer:
    return LocalServer(
        require_local_model(), alias=MODEL_ALIAS, log_file=log_dir / "server.log", **options
    )


@dataclass
class RunningServer:
    base_url: str
    process: subprocess.Popen


@contextmanager
def running_server(log_dir: Path) -> Iterator[RunningServer]:
    """The server LocalServer would start, run synchronously so a fixture can share it."""
    server = make_server(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    with server.log_file.open("wb") as log:
        process = subprocess.Popen(
            server.command(), stdout=subprocess.PIPE, stderr=log, env=child_env()
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        port = json.loads(line)["port"]
        yield RunningServer(f"http://127.0.0.1:{port}/v1", process)
    finally:
        process.kill()
        process.wait()
