"""Pure sub-agent pieces: definitions, the report parser, model resolution, the store."""

from __future__ import annotations

import json

import pytest

from codewhale.config_models import SubagentsConfig
from codewhale.subagents.contract import claimed_files, parse_report, verify_claims
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.roles import Role, role_prompt
from codewhale.subagents.spawn import resolve_model
from codewhale.subagents.state.merge import trim
from codewhale.subagents.store import StateFileError, SubagentStore
from tests.support.git_repo import git, make_repo


@pytest.mark.parametrize("style", ["{}:", "### {}", "**{}:**", "## {}:"])
def test_report_heading_styles(style):
    text = "\n".join(
        f"{style.format(name)} {name.lower()} text"
        for name in ("SUMMARY", "CHANGES", "EVIDENCE", "RISKS", "BLOCKERS")
    )
    report = parse_report("Intro line.\n" + text)
    assert report["well_formed"]
    assert report["summary"] == "summary text" and report["blockers"] == "blockers text"


def test_report_out_of_order_or_missing_is_malformed():
    assert not parse_report("SUMMARY: a\nRISKS: b\nCHANGES: c\nEVIDENCE: d\nBLOCKERS: e")[
        "well_formed"
    ]
    malformed = parse_report("SUMMARY: only this")
    assert not malformed["well_formed"] and malformed["raw"] == "SUMMARY: only this"


def test_claimed_files():
    assert claimed_files("None.") == []
    assert claimed_files("- src/app.py: fixed\n- `docs/x.md`\n* tests/test_a.py") == [
        "src/app.py",
        "docs/x.md",
        "tests/test_a.py",
    ]


def test_every_role_prompt_has_the_contract_once_and_the_role_line():
    for role in Role:
        prompt = role_prompt(role)
        assert prompt.count("SUMMARY:") == 1 and prompt.count("BLOCKERS:") == 1
        assert prompt.endswith(f"You are operating in the role of `{role.value}`.")


@pytest.mark.parametrize(
    ("config", "role", "type_name", "explicit", "expected"),
    [
        ({}, Role.GENERAL, "general", None, "parent"),
        ({"default_model": "d"}, Role.GENERAL, "general", None, "d"),
        ({"default_model": "d", "worker_model": "w"}, Role.GENERAL, "general", None, "w"),
        ({"worker_model": "w", "models": {"Worker": "m"}}, Role.GENERAL, "general", None, "m"),
        ({"explorer_model": "e"}, Role.EXPLORE, "explore", None, "e"),
        ({"awaiter_model": "a"}, Role.PLAN, "plan", None, "a"),
        ({"models": {"implementation": "i"}}, Role.IMPLEMENTER, "implementer", None, "i"),
        ({"models": {"test-writer": "t"}}, Role.IMPLEMENTER, "test-writer", None, "t"),
        ({"review_model": "r"}, Role.REVIEW, "review", "x", "x"),
    ],
)
def test_model_resolution_order(config, role, type_name, explicit, expected):
    resolved = resolve_model(explicit, role, type_name, None, SubagentsConfig(**config), "parent")
    assert resolved == expected


def _record(i: int, status: str) -> WorkerRecord:
    return WorkerRecord(
        run_id=f"r{i}",
        agent_id=f"agent_{i:08x}",
        name=f"n{i}",
        nickname="Moby",
        objective="o",
        description="d",
        type="general",
        role="general",
        model="m",
        workspace="/w",
        git_branch=None,
        session_boot_id="boot_x",
        status=status,
        updated_at_ms=i,
    )


def test_store_keeps_256_records_dropping_oldest_finished(tmp_path):
    records = [_record(i, "completed") for i in range(300)] + [_record(999, "running")]
    kept = trim([record.to_json() for record in records])
    assert len(kept) == 256
    assert kept[-1]["status"] == "running" and kept[0]["agent_id"] == _record(45, "x").agent_id


def test_events_are_capped_at_128(tmp_path):
    record = _record(1, "running")
    for n in range(200):
        record.add_event("running", f"e{n}")
    assert len(record.events) == 128 and record.events[-1]["seq"] == 200


def test_other_schema_versions_are_refused_and_left_untouched(tmp_path):
    store = SubagentStore(tmp_path)
    store.state_file.parent.mkdir(parents=True)
    original = json.dumps({"schema_version": 2, "agents": []})
    store.state_file.write_text(original)
    with pytest.raises(StateFileError, match="schema_version 2 is not supported"):
        store.load()
    assert store.state_file.read_text() == original


def test_checking_a_childs_claims_never_runs_the_repositorys_fsmonitor_hook(tmp_path):
    repo = make_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    marker = tmp_path / "hook-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(hook))
    (repo / "calc.py").write_text("x = 2\n")

    checked = verify_claims(repo, {"changes": "- calc.py: x is 2"})

    assert checked == {"status": "self_report_only", "git_checked": True}
    assert not marker.exists()
