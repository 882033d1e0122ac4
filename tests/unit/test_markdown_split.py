"""The streamed answer's block splitter: each top-level block is handed out once, when it
is finished, with the tokens a parse of the whole text gives it, and never parsed again."""

from __future__ import annotations

import itertools
import random

from codewhale.tui.markdown_split import Block, BlockSplitter, parser

DOCUMENT = """# Report

The first paragraph runs
over two lines.

- one
- two

  still two, after a blank line
- three

```python
def f():

    return 1
```

| a | b |
|---|---|
| 1 | 2 |

> quoted
> twice

1. first
2. second

Last words.
"""


def stream(text: str, sizes: list[int]) -> tuple[list[Block], BlockSplitter]:
    """Feed `text` in pieces of the given sizes, splitting after each; then close."""
    splitter = BlockSplitter()
    blocks: list[Block] = []
    at = 0
    for size in sizes:
        splitter.feed(text[at : at + size])
        at += size
        finished, _ = splitter.split()
        blocks += finished
    splitter.feed(text[at:])
    return blocks + splitter.close(), splitter


def shape(tokens) -> list[tuple[str, str, int]]:
    return [(token.type, token.content, token.level) for token in tokens]


def test_each_block_has_the_tokens_a_parse_of_the_whole_text_gives_it():
    whole = parser().parse(DOCUMENT)
    for pieces in ([1] * len(DOCUMENT), [7] * 100, random.Random(27).choices(range(1, 40), k=50)):
        blocks, _ = stream(DOCUMENT, pieces)
        assert "".join(block.source for block in blocks) == DOCUMENT
        assert shape(token for block in blocks for token in block.tokens) == shape(whole)
        kinds = [block.tokens[0].type for block in blocks]
        assert kinds == [
            "heading_open",
            "paragraph_open",
            "bullet_list_open",
            "fence",
            "table_open",
            "blockquote_open",
            "ordered_list_open",
            "paragraph_open",
        ]


def test_a_block_is_finished_only_once_the_next_blocks_first_line_is_complete():
    splitter = BlockSplitter()
    splitter.feed("Some text\n#")  # `#` alone would be a heading, ending the paragraph...
    assert splitter.split()[0] == []
    splitter.feed("bar\n\nNext")  # ...but `#bar` is the paragraph's second line
    assert splitter.split()[0] == []
    splitter.feed(" one\n")
    (paragraph,) = splitter.split()[0]
    assert paragraph.source == "Some text\n#bar\n\n"
    assert [token.content for token in paragraph.tokens if token.type == "inline"] == [
        "Some text\n#bar"
    ]


def test_a_fence_stays_open_until_its_closing_fence():
    splitter = BlockSplitter()
    splitter.feed("```\ncode\n\n# not a heading\n\nmore code\n")
    finished, open_tokens = splitter.split()
    assert finished == []
    assert [token.type for token in open_tokens] == ["fence"]
    splitter.feed("```\n\nAfter.\n")
    (fence,) = splitter.split()[0]
    assert fence.tokens[0].content == "code\n\n# not a heading\n\nmore code\n"


def test_finished_blocks_are_never_parsed_again():
    text = DOCUMENT * 20
    splitter = BlockSplitter()
    finished_up_to = 0  # the line where the blocks handed out so far end
    longest = 0
    for at in range(0, len(text), 5):
        splitter.feed(text[at : at + 5])
        before = splitter.parsed_chars
        finished, _ = splitter.split()
        # This parse began where the blocks handed out before it ended, not earlier...
        assert splitter.base == finished_up_to
        longest = max(longest, splitter.parsed_chars - before)
        for block in finished:
            finished_up_to = block.line + block.source.count("\n")
    # ...so it never took more than an open block, the next one's first line and a piece.
    blocks, _ = stream(DOCUMENT, [len(DOCUMENT)])
    widest = max(
        len(block.source) + len(after.source.split("\n", 1)[0]) + 1
        for block, after in itertools.pairwise(blocks)
    )
    assert longest <= widest + 5


def test_the_work_per_character_does_not_grow_with_the_text():
    def parsed_per_char(copies: int) -> float:
        text = DOCUMENT * copies
        _, splitter = stream(text, [9] * (len(text) // 9))
        return splitter.parsed_chars / len(text)

    assert parsed_per_char(40) <= 1.05 * parsed_per_char(10)


def test_link_definitions_are_noticed_for_the_rebuild_at_the_end():
    splitter = BlockSplitter()
    splitter.feed("See [the spec][spec].\n\n[spec]: https://example.com/spec\n\nMore.\n")
    splitter.split()
    splitter.close()
    assert splitter.saw_references
