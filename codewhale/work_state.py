"""The plan and the checklist the model keeps while it works (shown in the Work sidebar)."""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("pending", "in_progress", "completed")
GLYPHS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    status: str = "pending"


@dataclass
class WorkState:
    """Owned by one engine; the UI reads copies through `snapshot()`."""

    plan: list[Item] = field(default_factory=list)
    checklist: list[Item] = field(default_factory=list)
    explanation: str = ""

    def percent_complete(self) -> int:
        if not self.checklist:
            return 0
        done = sum(item.status == "completed" for item in self.checklist)
        return round(100 * done / len(self.checklist))

    def render_checklist(self) -> str:
        lines = [f"{self.percent_complete()}% complete"]
        lines += [f"{GLYPHS[item.status]} {item.id}. {item.text}" for item in self.checklist]
        return "\n".join(lines)

    def render_plan(self) -> str:
        lines = [self.explanation] if self.explanation else []
        lines += [f"{GLYPHS[item.status]} {item.text}" for item in self.plan]
        return "\n".join(lines)

    def snapshot(self) -> dict:
        return {
            "plan": [vars(item) for item in self.plan],
            "checklist": [vars(item) for item in self.checklist],
            "percent_complete": self.percent_complete(),
            "explanation": self.explanation,
        }
