"""The YAML frontmatter of agent and skill files, read the way Claude Code files need.

Hand-written Claude Code agents often put `<example>` blocks with `Context: …` and
`user: "…"` inside an unquoted `description:`, which strict YAML refuses ("mapping
values are not allowed here"). When strict parsing fails, the frontmatter is read
again line by line: a line opening with a top-level `key:` starts a field, every
other line continues the field before it. Only the field names an agent file
may have start a field, because example dialogue (`user: …`) sits at column 0 too.
The file then loads with a warning instead of being lost. Shared by agent definitions
(codewhale/subagents/definitions.py) and skills (codewhale/skills.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_FIELD_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*)|\s*)$")


class FrontmatterError(ValueError):
    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


@dataclass
class Frontmatter:
    fields: dict[str, Any]
    body: str
    # Line numbers in the file, for messages that point at a field.
    lines: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    # Set when strict YAML failed and the fields were read line by line: if they then
    # make no valid definition, this is the better explanation.
    yaml_error: FrontmatterError | None = None

    def line_of(self, key: str) -> int:
        return self.lines.get(key, 2)


def read_frontmatter(text: str, field_names: frozenset[str]) -> Frontmatter:
    """Fields and body of an agent file; FrontmatterError with a line number if unreadable.

    `field_names` are the keys that may start a field when strict YAML fails.
    """
    import yaml

    front, body = _split(text)
    lines = _field_lines(front)
    try:
        fields = yaml.safe_load(front) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(error, "problem", None) or error
        strict = FrontmatterError(line, f"invalid YAML: {problem}")
        lenient = _lenient(front, field_names)
        if "name" not in lenient:
            raise strict from None
        note = f"the frontmatter is not valid YAML (line {line}: {problem}); read line by line"
        return Frontmatter(lenient, body, lines, [note], strict)
    if not isinstance(fields, dict):
        raise FrontmatterError(2, "the frontmatter must be a mapping of fields")
    return Frontmatter(fields, body, lines)


def _split(text: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        raise FrontmatterError(1, "missing YAML frontmatter (the file must open with a --- line)")
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise FrontmatterError(1, "the frontmatter is not closed with a '---' line")


def _field_lines(front: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    for number, line in enumerate(front.split("\n"), start=2):
        if match := _FIELD_LINE.match(line):
            lines.setdefault(match.group(1), number)
    return lines


def _lenient(front: str, field_names: frozenset[str]) -> dict[str, Any]:
    """Top-level `key: value` lines of known keys; other lines continue the previous value."""
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in front.split("\n"):
        match = _FIELD_LINE.match(line)
        if match and match.group(1) in field_names and match.group(1) not in fields:
            current = fields[match.group(1)] = [match.group(2) or ""]
        elif current is not None:
            current.append(line)
    return {key: _scalar("\n".join(parts).strip()) for key, parts in fields.items()}


def _scalar(value: str) -> Any:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if value.startswith("[") and value.endswith("]"):
        return [item.strip().strip("\"'") for item in value[1:-1].split(",") if item.strip()]
    return value
