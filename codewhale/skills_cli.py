"""`codewhale skills list [--json]`: the skills a session in this workspace would have."""

from __future__ import annotations

import argparse
import json

from codewhale.skills import load_skills


def run_skills_command(args: argparse.Namespace) -> int:
    skills = load_skills(args.workspace_path)
    if args.json:
        entries = [
            {
                "name": skill.name,
                "description": skill.description,
                "path": str(skill.file),
                "allowed_tools": list(skill.allowed_tools),
                "model_invocable": skill.model_invocable,
                "user_invocable": skill.user_invocable,
                "argument_hint": skill.argument_hint,
            }
            for skill in skills.skills.values()
        ]
        print(json.dumps({"skills": entries, "warnings": skills.warnings}, indent=2))
        return 0
    if not skills.skills:
        print("No skills. Put one in .claude/skills/<name>/SKILL.md or .codewhale/skills/.")
    for skill in skills.skills.values():
        who = [
            w
            for w, on in (
                ("model", skill.model_invocable),
                ("/" + skill.name, skill.user_invocable),
            )
            if on
        ]
        print(f"{skill.name}  ({', '.join(who) or 'nobody'})  {skill.file}")
        print(f"    {skill.description}")
    for warning in skills.warnings:
        print(f"warning: {warning}")
    return 0
