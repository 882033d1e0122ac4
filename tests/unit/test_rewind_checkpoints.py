"""Which prompts /rewind offers: those still in the conversation, and how far back each goes."""

from __future__ import annotations

from codewhale.engine.conversation import Conversation
from codewhale.runtime.rewind import Checkpoints
from codewhale.tools.file_timeline import FileTimeline


def send(checkpoints: Checkpoints, text: str) -> None:
    """As the engine does: the prompt joins the messages, then the checkpoint is taken."""
    messages = checkpoints.conversation.messages
    messages.append({"role": "user", "content": text})
    checkpoints.prompt_sent(len(messages) - 1)
    messages.append({"role": "assistant", "content": f"answer to {text}"})


def fresh() -> Checkpoints:
    return Checkpoints(Conversation([{"role": "system", "content": "sys"}]), FileTimeline())


def test_points_are_newest_first_and_gone_once_cleared_or_rewound_past():
    checkpoints = fresh()
    for text in ("one", "two", "three"):
        send(checkpoints, text)
    points = checkpoints.points()
    assert [(p.text, p.index, p.mark) for p in points] == [
        ("three", 5, 3),
        ("two", 3, 2),
        ("one", 1, 1),
    ]

    checkpoints.conversation.rewind(points[1].index)
    send(checkpoints, "two again")  # at the index "two" had: not taken for it
    assert [p.text for p in checkpoints.points()] == ["two again", "one"]

    checkpoints.conversation.clear()
    assert checkpoints.points() == []
    assert checkpoints.find(1) is None


def test_a_prompt_a_compaction_summarised_offers_its_files_only():
    checkpoints = fresh()
    for text in ("one", "two", "three"):
        send(checkpoints, text)
    conversation = checkpoints.conversation
    conversation.compact({"role": "user", "content": "summary of one and two"}, recent_start=5)

    offered = {p.text: p.conversation for p in checkpoints.points()}
    assert offered == {"three": True, "two": False, "one": False}

    conversation.rewind(3)  # a rewind past the summary's end sends the rest as it is
    assert conversation.summary is None
    assert conversation.request_messages() == conversation.messages
