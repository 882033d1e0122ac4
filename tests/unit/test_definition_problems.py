"""Agent definitions with problems, told briefly: real files in a temp dir."""

from __future__ import annotations

from codewhale.subagents.definition_problems import startup_notices, unknown_type_error
from codewhale.subagents.definitions import load_definitions
from codewhale.subagents.roles import served_tools
from codewhale.tools.registry import default_tools

KNOWN = served_tools(tool.name for tool in default_tools())


def write_agents(folder, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_one_warned_definition_and_nothing_failed_is_one_singular_line(tmp_path):
    write_agents(tmp_path, {"a.md": "---\nname: a\ndescription: d\ncolor: plaid\n---\nbody\n"})
    loaded = load_definitions([tmp_path], KNOWN)
    assert startup_notices(loaded) == [
        "1 agent definition has warnings: see `codewhale agents types`"
    ]
    assert startup_notices(load_definitions([], KNOWN)) == []  # the built-ins are clean


def test_a_failed_file_is_found_by_its_declared_name_too(tmp_path):
    # The file is named otherwise than the agent; its `name:` line still finds it.
    write_agents(tmp_path, {"misc.md": "---\nname: 'deployer'\nmax_steps: 0\n---\nbody\n"})
    loaded = load_definitions([tmp_path], KNOWN)
    assert startup_notices(loaded) == [
        "1 agent definition failed to load: see `codewhale agents types`"
    ]
    message = str(unknown_type_error("Deployer", loaded))
    assert message == (
        f"Agent type 'Deployer' is defined in {tmp_path / 'misc.md'}, but that file failed "
        "to parse (line 2: 'description' is required). Fix the file, or use another type."
    )
