"""Load the effective config from its layers: flag > env > project > user > default.

Each layer is a plain dict; every value remembers which layer set it, so a
warning or an error can name the file (and line) it came from, and
`codewhale config show` can print the source of each value.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from codewhale.config_models import (
    FREE_FORM_TABLES,
    PROJECT_FORBIDDEN_KEYS,
    PROVIDER_ALIASES,
    Config,
)
from codewhale.config_tables import Table, TableError
from codewhale.paths import WorkspacePaths, user_config_file, user_dirs
from codewhale.providers.local_model import missing_local_runtime
from codewhale.providers.presets import DEFAULT_PROVIDER, PRESETS
from codewhale.providers.settings import ProviderSettings

_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "dict_type": "a table",
    "model_type": "a table",
    "extra_forbidden": "no such key",
}
_SWITCH_VALUES = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


class ConfigError(Exception):
    """Bad config input; the message names the file, the key and what was expected."""


@dataclass(frozen=True)
class Layer:
    """One source of values: its label for humans, its file (if any) and its data."""

    label: str
    data: dict[str, Any]
    path: Path | None = None
    text: str = ""


@dataclass(frozen=True)
class LoadedConfig:
    """The effective config plus where each value came from."""

    config: Config
    sources: Mapping[str, str]
    warnings: tuple[str, ...]
    user_file: Path
    project_file: Path | None
    workspace: Path | None
    # True when no provider or key was configured and the offline model stands in.
    offline_fallback: bool = False

    def provider_settings(self) -> ProviderSettings:
        """Settings for the provider client, with preset defaults filled in."""
        config = self.config
        preset = PRESETS[config.provider]
        network = config.network
        base_url = config.base_url or preset.base_url
        model = config.model or preset.default_model
        # The preset's models are its own endpoint's: a self-hosted server behind the
        # openai preset has no gpt-4.1-mini, so helper calls (compaction's summaries) use
        # the session's model there unless fast_model says otherwise.
        own_endpoint = base_url.rstrip("/") == preset.base_url.rstrip("/")
        fast_model = config.fast_model or (preset.fast_model if own_endpoint else model)
        return ProviderSettings(
            provider=preset.name,
            label=endpoint_label(preset.label, preset.base_url, base_url),
            base_url=base_url,
            model=model,
            fast_model=fast_model,
            api_key=config.api_key,
            api_key_source=self.sources.get("api_key") if config.api_key else None,
            headers=dict(config.headers),
            allow_insecure_http=config.allow_insecure_http,
            connect_timeout_secs=network.connect_timeout_secs,
            stream_idle_timeout_secs=max(
                network.stream_idle_timeout_secs, preset.min_idle_timeout_secs
            ),
            max_retries=network.max_retries,
            retry_deadline_secs=network.retry_deadline_secs,
            offer_tools=config.offline_tools if preset.name == "local" else True,
            reasoning_effort=config.reasoning_effort if preset.effort_field else None,
            effort_field=preset.effort_field,
        )


def endpoint_label(preset_label: str, preset_url: str, base_url: str) -> str:
    """How messages name the endpoint: the preset's name on the preset's own URL, else
    the host (a self-hosted server behind the openai preset is not "OpenAI")."""
    if not base_url or base_url.rstrip("/") == preset_url.rstrip("/"):
        return preset_label
    return urlsplit(base_url).netloc or base_url


def redact_secret(value: str) -> str:
    """Show just enough of a secret to recognise it: `sk-…wxyz`."""
    if len(value) < 12:
        return "…"
    prefix = "sk-" if value.startswith("sk-") else ""
    return f"{prefix}…{value[-4:]}"


def load_config(
    *,
    workspace: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> LoadedConfig:
    """Read every layer, validate the merged result, and explain every adjustment."""
    env = os.environ if env is None else env
    warnings: list[str] = []
    user_file = user_config_file(user_dirs(env))
    layers = [_file_layer(user_file, "user config", warnings)]
    project_file = WorkspacePaths(workspace).config_file if workspace is not None else None
    if project_file is not None:
        project = _file_layer(project_file, "project config", warnings)
        layers.append(_without_forbidden_keys(project, warnings))
    provider_so_far = _provider_of(layers, overrides, env)
    layers.append(_env_layer(env, provider_so_far))
    layers.append(Layer("flag", {key: value for key, value in (overrides or {}).items()}))
    merged, origin = _merge(layers)
    config = _validate(merged, origin, warnings)
    offline = _falls_back_to_offline_model(config, origin)
    if offline:
        config = config.replace(provider="local")
    sources = _sources(config, origin)
    if offline:
        sources["provider"] = "default (no API key: offline model)"
    if config.reasoning_effort and not PRESETS[config.provider].effort_field:
        warnings.append(
            f"reasoning_effort is not sent to {PRESETS[config.provider].label}, whose API "
            "does not take it (pick a reasoning model instead)"
        )
    return LoadedConfig(
        config=config,
        sources=sources,
        warnings=tuple(warnings),
        user_file=user_file,
        project_file=project_file,
        workspace=workspace,
        offline_fallback=offline,
    )


def load_for_command(workspace: Path, overrides: Mapping[str, Any]) -> LoadedConfig | None:
    """The config a `codewhale <command>` runs with; None once the error is on stderr (the
    command then exits 2)."""
    try:
        return load_config(workspace=workspace, overrides=overrides)
    except ConfigError as error:
        print(f"codewhale: config error: {error}", file=sys.stderr)
        return None


def _falls_back_to_offline_model(config: Config, origin: Mapping[str, Layer]) -> bool:
    """Nothing chosen about the provider and no key: use the bundled model if installed.

    Naming a model or endpoint shows an intent for a hosted provider, so that gets the
    missing-key error rather than a quiet switch to a far weaker model.
    """
    chosen = any(
        key in origin for key in ("provider", "base_url", "api_key", "model", "fast_model")
    )
    return (
        config.offline_fallback
        and not chosen
        and not config.api_key
        and missing_local_runtime() is None
    )


# -- reading layers -------------------------------------------------------------


def _file_layer(path: Path, kind: str, warnings: list[str]) -> Layer:
    label = f"{kind} {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Layer(label, {}, path)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the file is not valid UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the file ({error.strerror or error})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    layer = Layer(label, data, path, text)
    for key in _unknown_keys(data, Config):
        warnings.append(f"{path}: unknown key '{key}' (ignored){_suggestion(key)}")
    return Layer(label, _drop_keys(data, set(_unknown_keys(data, Config))), path, layer.text)


def _without_forbidden_keys(layer: Layer, warnings: list[str]) -> Layer:
    data = {
        key: dict(value) if isinstance(value, dict) else value for key, value in layer.data.items()
    }
    for key in PROJECT_FORBIDDEN_KEYS:
        *tables, leaf = key.split(".")
        table: dict[str, Any] = data
        for name in tables:
            child = table.get(name)
            table = child if isinstance(child, dict) else {}
        if leaf in table:
            del table[leaf]
            warnings.append(
                f"{layer.path}: '{key}' is ignored in a project config: a cloned repository "
                "must not be able to redirect your API key or requests, or open your private "
                "network. Set it in your user config or the environment instead."
            )
    return Layer(layer.label, data, layer.path, layer.text)


def _provider_of(layers: list[Layer], overrides: Mapping[str, Any] | None, env: Mapping) -> str:
    """The provider the env layer must be read for (flag > env > files > default)."""
    candidates = [(overrides or {}).get("provider"), env.get("CODEWHALE_PROVIDER")]
    candidates += [layer.data.get("provider") for layer in reversed(layers)]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            name = candidate.strip().lower()
            return PROVIDER_ALIASES.get(name, name)
    return DEFAULT_PROVIDER


def _env_layer(env: Mapping[str, str], provider: str) -> Layer:
    """Environment variables; CODEWHALE_* beat the provider's own variables."""
    data: dict[str, Any] = {}
    origin: dict[str, str] = {}

    def take(key: str, *names: str) -> None:
        for name in names:
            value = env.get(name, "").strip()
            if value:
                data[key] = value
                origin[key] = name
                return

    preset = PRESETS.get(provider)
    deepseek = provider == "deepseek"
    take("provider", "CODEWHALE_PROVIDER")
    take("model", "CODEWHALE_MODEL", *(["DEEPSEEK_MODEL"] if deepseek else []))
    take("base_url", "CODEWHALE_BASE_URL", *(["DEEPSEEK_BASE_URL"] if deepseek else []))
    key_envs = [preset.key_env] if preset is not None and preset.key_env else []
    take("api_key", "CODEWHALE_API_KEY", *key_envs)
    for name in ("CODEWHALE_MEMORY", "DEEPSEEK_MEMORY"):
        value = env.get(name, "").strip()
        if not value:
            continue
        if value.lower() not in _SWITCH_VALUES:
            raise ConfigError(f"environment variable {name}={value!r}: expected on or off")
        data["memory"] = {"enabled": _SWITCH_VALUES[value.lower()]}
        origin["memory.enabled"] = name
        break
    return Layer("env", data, text="\n".join(f"{k}={v}" for k, v in origin.items()))


# -- merging and validation ---------------------------------------------------------


def _merge(layers: list[Layer]) -> tuple[dict[str, Any], dict[str, Layer]]:
    """Deep-merge layers in order; `origin` maps each dotted leaf key to its layer."""
    merged: dict[str, Any] = {}
    origin: dict[str, Layer] = {}
    for layer in layers:
        for dotted, value in _leaves(layer.data):
            _assign(merged, dotted.split("."), value)
            origin[dotted] = layer
    return merged, origin


def _leaves(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted paths to every value; free-form tables count as one value each."""
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted not in FREE_FORM_TABLES:
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, value


def _assign(target: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[path[-1]] = value


def _validate(merged: dict[str, Any], origin: dict[str, Layer], warnings: list[str]) -> Config:
    notes: list[tuple[tuple[str, ...], str]] = []
    try:
        config = Config.validate(merged, notes)
    except TableError as error:
        raise ConfigError(_describe_validation_error(error, merged, origin)) from None
    for keys, message in notes:
        # Blame the first cause a person actually set (a default cannot be edited).
        key, layer = next(
            ((key, origin[key]) for key in keys if key in origin), (keys[0], Layer("default", {}))
        )
        where = layer.path or f"{layer.label} {_env_name(layer, key)}".strip()
        warnings.append(f"{where}: {message}")
    return config


def _describe_validation_error(
    error: TableError, merged: dict[str, Any], origin: dict[str, Layer]
) -> str:
    problems = []
    for problem in error.problems:
        dotted = ".".join(str(part) for part in problem.loc)
        layer = _layer_for(dotted, origin)
        expected = _EXPECTED.get(problem.type)
        reason = problem.msg
        if expected and problem.type != "extra_forbidden":
            reason = f"expected {expected}, got {_show(_lookup(merged, dotted))}"
        if layer.path is not None:
            line = _line_of(dotted, layer.text)
            where = f"{layer.path}" + (f", line {line}" if line else "")
        else:
            where = f"{layer.label} {_env_name(layer, dotted)}".strip()
        problems.append(f"{where}: {dotted}: {reason}")
    return "\n".join(problems)


def _layer_for(dotted: str, origin: dict[str, Layer]) -> Layer:
    """The layer that set `dotted`, or the one that set its nearest parent table."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        key = ".".join(parts[:end])
        if key in origin:
            return origin[key]
    matches = [layer for key, layer in origin.items() if key.startswith(dotted + ".")]
    return matches[-1] if matches else Layer("default", {})


def _env_name(layer: Layer, dotted: str) -> str:
    if layer.label != "env":
        return ""
    for line in layer.text.splitlines():
        key, _, name = line.partition("=")
        if key == dotted or dotted.startswith(key + "."):
            return name
    return ""


def _lookup(data: Mapping[str, Any], dotted: str) -> Any:
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _line_of(dotted: str, text: str) -> int | None:
    """Best-effort line number of `dotted` in a TOML text (for error messages)."""
    *tables, key = dotted.split(".")
    key_line = re.compile(rf"^\s*(\"?){re.escape(key)}\1\s*=")
    table = ""
    header = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+")
    fallback = None
    for number, line in enumerate(text.splitlines(), start=1):
        if match := header.match(line):
            table = match.group(1).replace(" ", "")
            if table == ".".join([*tables, key]):
                return number
            continue
        if key_line.match(line):
            if table == ".".join(tables):
                return number
            fallback = fallback or number
    return fallback


# -- unknown keys ------------------------------------------------------------------


def _unknown_keys(data: Mapping[str, Any], model: type[Table], prefix: str = "") -> list[str]:
    unknown = []
    keys = model.keys()
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in keys:
            unknown.append(dotted)
            continue
        nested = keys[key]
        if isinstance(nested, type) and issubclass(nested, Table) and isinstance(value, dict):
            unknown.extend(_unknown_keys(value, nested, dotted + "."))
    return unknown


def _drop_keys(data: dict[str, Any], dotted_keys: set[str], prefix: str = "") -> dict[str, Any]:
    kept = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if dotted in dotted_keys:
            continue
        if isinstance(value, dict) and dotted not in FREE_FORM_TABLES:
            value = _drop_keys(value, dotted_keys, dotted + ".")
        kept[key] = value
    return kept


def _suggestion(dotted: str) -> str:
    known = list(known_keys(Config))
    close = difflib.get_close_matches(dotted, known, n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


def known_keys(model: type[Table], prefix: str = "") -> Iterator[str]:
    for name, nested in model.keys().items():
        if isinstance(nested, type) and issubclass(nested, Table):
            yield from known_keys(nested, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


# -- sources ---------------------------------------------------------------------------


def _sources(config: Config, origin: dict[str, Layer]) -> dict[str, str]:
    """Label every effective key with the layer it came from."""
    preset_derived = {"model", "fast_model", "base_url"}
    values = config.to_dict()
    sources = {}
    for dotted in known_keys(Config):
        layer = origin.get(dotted)
        if layer is None:
            unset = _lookup(values, dotted) is None
            sources[dotted] = (
                f"preset {config.provider}" if dotted in preset_derived and unset else "default"
            )
        elif layer.label == "env":
            sources[dotted] = f"env {_env_name(layer, dotted)}"
        elif layer.label == "flag":
            sources[dotted] = f"flag --{dotted.replace('_', '-')}"
        else:
            sources[dotted] = layer.label
    return sources
