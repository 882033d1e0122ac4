"""The session's permission rules: one object shared by the whole delegation tree.

Deny beats ask beats allow. The dispatcher asks `verdict` for every call; read tools ask
`denied_read` for each file they would show, so a denied file is refused by every read
path. `/permissions` and the "always in this project" answer change the files, and the
rules are read again from them, so what is enforced is always what the files say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codewhale.approval_rules import ApprovalRule, RuleKind, plain_words, writes_or_runs
from codewhale.digest_trust import DigestTrustStore
from codewhale.permissions import Decision, Verdict
from codewhale.rules.rule import SHELL_TOOLS, Effect, Family, Rule
from codewhale.rules.shell_parts import core_command, split_command
from codewhale.rules.sources import (
    LoadedRules,
    RuleFile,
    add_claude_rule,
    load_rules,
    project_local_settings,
    remove_rule,
    trust_allow,
    trusted_allows,
)


@dataclass(frozen=True)
class RuleVerdict:
    """What the rules say about one call, and the rule that said it."""

    effect: Effect
    rule: Rule

    def refusal(self, tool: str) -> str:
        return (
            f"{tool} is denied by the permission rule '{self.rule.text}' in {self.rule.source}. "
            "Do not retry it or work around it; continue another way or ask the user."
        )


@dataclass
class PermissionRules:
    """The rules in force for one session, re-read from their files after each change."""

    workspace: Path = field(default_factory=Path.cwd)
    files: list[RuleFile] = field(default_factory=list)
    trust: DigestTrustStore | None = None
    loaded: LoadedRules = field(default_factory=LoadedRules)

    @classmethod
    def load(
        cls, workspace: Path, files: list[RuleFile], trust: DigestTrustStore
    ) -> PermissionRules:
        rules = cls(workspace.resolve(), files, trust)
        rules.reload()
        return rules

    def reload(self) -> None:
        trusted = trusted_allows(self.trust, self.workspace) if self.trust else set()
        # Swapped whole: read tools running in threads see the old list or the new one.
        self.loaded = load_rules(self.files, self.workspace, trusted)

    @property
    def rules(self) -> list[Rule]:
        return self.loaded.rules

    def cover(self, tool: str) -> bool:
        """Whether any rule in force names `tool`."""
        return any(rule.covers_tool(tool) for rule in self.rules)

    def verdict(
        self,
        tool: str,
        arguments: Mapping[str, object],
        *,
        reads: Sequence[Path] = (),
        writes: Sequence[Path] = (),
    ) -> RuleVerdict | None:
        """The strongest rule matching this call (deny, then ask, then allow), or None."""
        covering = [rule for rule in self.rules if rule.covers_tool(tool)]
        if not covering:
            return None
        if tool in SHELL_TOOLS:
            return _shell_verdict(covering, str(arguments.get("command") or ""))
        for effect in (Effect.DENY, Effect.ASK, Effect.ALLOW):
            for rule in covering:
                if rule.effect is effect and rule.matches_call(arguments, reads, writes):
                    return RuleVerdict(effect, rule)
        return None

    def denied_read(self, tool: str, path: Path) -> Rule | None:
        """The deny rule that keeps `tool` from showing the file at `path` (resolved)."""
        for rule in self.rules:
            if (
                rule.effect is Effect.DENY
                and rule.family is Family.READ
                and rule.covers_tool(tool)
                and rule.matches_path(path)
            ):
                return rule
        return None

    def remember_in_project(self, granted: ApprovalRule) -> str | None:
        """Write `granted` as an allow rule to the project's `.claude/settings.local.json`
        and trust it here; its text, or None when it has no lasting form.

        Raises RuleFileError when the file cannot be changed.
        """
        text = claude_rule_text(granted)
        if text is None:
            return None
        add_claude_rule(project_local_settings(self.workspace), Effect.ALLOW, text)
        if self.trust is not None:
            trust_allow(self.trust, self.workspace, text)
        self.reload()
        return text

    def remove(self, rule: Rule) -> None:
        """Take `rule` out of its file and stop applying it; raises RuleFileError."""
        remove_rule(rule)
        self.reload()


def _shell_verdict(covering: list[Rule], command: str) -> RuleVerdict | None:
    """Deny or ask if a rule matches any part; allow only if every part is allowed."""
    split = split_command(command)
    parts = split.parts or (" ".join(command.split()),)
    for effect in (Effect.DENY, Effect.ASK):
        for rule in covering:
            if rule.effect is effect and any(
                rule.matches_command(part) or rule.matches_command(core_command(part))
                for part in parts
            ):
                return RuleVerdict(effect, rule)
    allows = [rule for rule in covering if rule.effect is Effect.ALLOW]
    whole = " ".join(command.split())
    for rule in allows:
        # `Bash` alone covers everything; an exact rule covers its own text, chained or not.
        if rule.specifier is None or rule.specifier.strip() in ("", "*"):
            return RuleVerdict(Effect.ALLOW, rule)
        if "*" not in rule.specifier and rule.matches_command(whole):
            return RuleVerdict(Effect.ALLOW, rule)
    if split.opaque or not parts:
        return None
    found = []
    for part in parts:
        allowing = next((rule for rule in allows if _allows_part(rule, part)), None)
        if allowing is None:
            return None
        found.append(allowing)
    return RuleVerdict(Effect.ALLOW, found[0])


def _allows_part(rule: Rule, part: str) -> bool:
    """A pattern rule allows a plain form only: never an option or script that writes
    files or runs programs (`find -exec`, `sed -i`), as session "always" rules do."""
    if not rule.matches_command(part):
        return False
    if rule.specifier is not None and "*" not in rule.specifier:
        return True  # exact: the user wrote this very command
    words = plain_words(part)
    return words is not None and not writes_or_runs(words)


def claude_rule_text(granted: ApprovalRule) -> str | None:
    """A session grant in Claude Code's syntax, or None when it has no lasting form (an
    RLM session, protected paths: those are asked about again next time)."""
    if granted.tool == "exec_shell" and granted.kind is RuleKind.PREFIX:
        return f"Bash({granted.value}:*)"
    if granted.tool == "exec_shell" and granted.kind is RuleKind.EXACT:
        return f"Bash({granted.value})"
    if granted.tool == "fetch_url" and granted.kind is RuleKind.HOST:
        return f"WebFetch(domain:{granted.value})"
    if granted.kind is RuleKind.TOOL and granted.tool:
        return granted.tool
    return None


def ruled_decision(decision: Decision, ruled: RuleVerdict | None) -> Decision:
    """The mode's decision with the rules applied: an allow rule spares the question, an
    ask rule asks where the mode would not; neither lifts a refusal (deny is the caller's)."""
    if ruled is None or decision.verdict is Verdict.DENY:
        return decision
    if ruled.effect is Effect.ALLOW and decision.verdict is Verdict.ASK:
        return Decision(Verdict.ALLOW)
    if ruled.effect is Effect.ASK and decision.verdict is Verdict.ALLOW:
        return Decision(
            Verdict.ASK, f"the permission rule '{ruled.rule.text}' in {ruled.rule.source} asks"
        )
    return decision
