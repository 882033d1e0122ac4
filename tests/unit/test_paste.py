"""Long pastes folded to tokens: when they fold, how tokens read, and what goes out."""

from __future__ import annotations

from codewhale.tui.paste import FOLD_CHARS, FOLD_LINES, Pastes, expand, folds


def test_a_paste_folds_past_twenty_lines_or_two_thousand_characters():
    assert not folds("line\n" * FOLD_LINES)
    assert folds("line\n" * (FOLD_LINES + 1))
    assert not folds("x" * FOLD_CHARS)
    assert folds("x" * (FOLD_CHARS + 1))


def test_tokens_name_the_size_and_stay_unique():
    pastes = Pastes()
    assert pastes.add("a\n" * 200) == "[pasted 200 lines]"
    assert pastes.add("b\n" * 200) == "[pasted 200 lines #2]"
    assert pastes.add("y" * 3400) == "[pasted 3,400 characters]"


def test_a_terminals_carriage_returns_reach_the_model_as_newlines():
    pastes = Pastes()
    token = pastes.add("one\r\n" * 15 + "two\r" * 15)
    assert expand(token, pastes.used_in(token)) == "one\n" * 15 + "two\n" * 15


def test_only_tokens_still_in_the_message_are_sent_and_each_is_expanded_once():
    pastes = Pastes()
    first = pastes.add("a\n" * 30)
    # A paste whose text holds the first token's text: it is sent as pasted.
    second = pastes.add(f"{first}\n" * 30)
    message = f"see {second}"
    used = pastes.used_in(message)
    assert list(used) == [second]
    assert expand(message, used) == "see " + f"{first}\n" * 30
