"""`codewhale config show | path | init`: plain text, no UI or network imports."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from codewhale.atomic import atomic_write_text
from codewhale.config import LoadedConfig, load_for_command, redact_secret
from codewhale.mcp.specs import only_references, redact_url
from codewhale.paths import user_config_file, user_dirs
from codewhale.sandbox import describe, sandbox_status
from codewhale.secret_names import secret_name

USAGE = """usage: codewhale config ACTION

  show [--json]   the effective config, each value with its source (secrets redacted)
  path            where config files and user directories are
  init [--force]  write the annotated example as the user config file
  example         print the annotated example: every key, commented, at its default
"""


def run_config_command(args: argparse.Namespace) -> int:
    action = getattr(args, "config_command", None)
    if action is None:
        print(USAGE, file=sys.stderr, end="")
        return 2
    if action == "init":
        return _init(force=args.force)
    if action == "example":
        print(example_text(), end="")
        return 0
    if (loaded := load_for_command(args.workspace_path, args.overrides)) is None:
        return 2
    if action == "path":
        _print_paths(loaded)
        return 0
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(_show_json(loaded) if args.json else _show_text(loaded))
    return 0


def effective_values(loaded: LoadedConfig) -> dict[str, Any]:
    """The config as nested plain data, preset defaults filled in and secrets redacted."""
    values = loaded.config.to_dict()
    settings = loaded.provider_settings()
    values.update(base_url=settings.base_url, model=settings.model, fast_model=settings.fast_model)
    if values["api_key"]:
        values["api_key"] = redact_secret(values["api_key"])
    values["headers"] = {
        name: redact_secret(value) if secret_name(name) else value
        for name, value in values["headers"].items()
    }
    for server in values["mcp"]["servers"].values():
        _redact_mcp_server(server)
    return values


def _redact_mcp_server(server: dict[str, Any]) -> None:
    """An MCP server's env and headers carry its credentials, whatever their names: every
    value is shown redacted unless it only names variables (`${TOKEN}`), and so are URL
    query values (tokens travel there too)."""
    for table in ("env", "headers"):
        server[table] = {
            name: value if only_references(value) else redact_secret(value)
            for name, value in server[table].items()
        }
    if server["url"]:
        server["url"] = redact_url(server["url"])


def _show_json(loaded: LoadedConfig) -> str:
    document = {
        "values": effective_values(loaded),
        "sources": dict(loaded.sources),
        "warnings": list(loaded.warnings),
        "sandbox": _sandbox(loaded),
        "files": {
            "user": str(loaded.user_file),
            "project": str(loaded.project_file) if loaded.project_file else None,
        },
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def _show_text(loaded: LoadedConfig) -> str:
    values = effective_values(loaded)
    top = [(key, value) for key, value in values.items() if not isinstance(value, dict)]
    # Free-form tables, shown inline: `[hooks]` is an event -> list map (docs/HOOKS.md).
    inline = ("headers", "hooks")
    top += [(key, values[key]) for key in inline]
    blocks = [_table_block("", top, loaded)]
    for section, table in values.items():
        if isinstance(table, dict) and section not in inline:
            blocks.append(_table_block(section, list(table.items()), loaded))
    blocks.append(f"# {_sandbox(loaded)['summary']}")
    return "\n\n".join(blocks)


def _sandbox(loaded: LoadedConfig) -> dict[str, Any]:
    """Whether the sandbox starts here with this config: what `[sandbox]` leads to."""
    enabled = loaded.config.sandbox.enabled
    status = sandbox_status(enabled)
    return {
        "available": status.available,
        "reason": status.reason,
        "summary": describe(status, enabled),
    }


def _table_block(section: str, items: list[tuple[str, Any]], loaded: LoadedConfig) -> str:
    rows = []
    for key, value in items:
        dotted = f"{section}.{key}" if section else key
        rows.append((f"{key} = {_toml_value(value)}", loaded.sources.get(dotted, "default")))
    width = max(len(left) for left, _ in rows)
    lines = [f"[{section}]"] if section else []
    lines += [f"{left.ljust(width)}  # {source}" for left, source in rows]
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    return json.dumps(value, ensure_ascii=False)


def _print_paths(loaded: LoadedConfig) -> None:
    dirs = user_dirs()

    def mark(path: Path | None) -> str:
        if path is None:
            return "(no workspace)"
        return f"{path}" + ("" if path.exists() else "  (not created yet)")

    print(f"user config      {mark(loaded.user_file)}")
    print(f"project config   {mark(loaded.project_file)}")
    print(f"config dir       {dirs.config_dir}")
    print(f"data dir         {dirs.data_dir}")
    print(f"state dir        {dirs.state_dir}")
    print(f"cache dir        {dirs.cache_dir}")


def example_text() -> str:
    """config.example.toml as the package ships it (also linked at the source tree's top)."""
    return resources.files("codewhale.data").joinpath("config.example.toml").read_text("utf-8")


def _init(*, force: bool) -> int:
    path = user_config_file(user_dirs())
    if path.exists() and not force:
        print(
            f"codewhale: {path} already exists; not overwriting it. "
            "Edit it, or run `codewhale config init --force` to replace it.",
            file=sys.stderr,
        )
        return 1
    try:
        atomic_write_text(path, example_text())  # 0600: an api_key may go in it
    except OSError as error:
        print(f"codewhale: cannot write {path}: {error.strerror or error}", file=sys.stderr)
        return 1
    print(f"Wrote {path}: every key, commented out at its default; uncomment what you change.")
    print('Add api_key = "..." there, or set DEEPSEEK_API_KEY in your environment.')
    return 0
