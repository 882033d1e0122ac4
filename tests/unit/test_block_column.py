"""The column of an answer's finished blocks: positions as Textual's vertical layout
gives them, and spacers that leave everything after them where it was."""

from __future__ import annotations

import itertools

from codewhale.tui.block_column import Column, estimate
from codewhale.tui.markdown_split import parser

# (height, top margin, bottom margin): headings, paragraphs, a fence, a list, a table.
BLOCKS = [(1, 2, 1), (3, 0, 1), (7, 1, 1), (4, 0, 1), (1, 1, 1), (7, 0, 1), (2, 2, 1)]


def stacked(blocks: list[tuple[int, int, int]]) -> tuple[list[int], int]:
    """Textual's vertical layout: each block's top edge, and the height of them all."""
    tops: list[int] = []
    y = blocks[0][1]
    for index, (height, _, bottom) in enumerate(blocks):
        tops.append(y)
        after = blocks[index + 1][1] if index + 1 < len(blocks) else 0
        y += height + max(bottom, after)
    return tops, y


def column_of(blocks: list[tuple[int, int, int]]) -> Column:
    column = Column()
    for index, block in enumerate(blocks):
        column.add(0, 0, 0)
        column.measure(index, *block)
    return column


def test_blocks_sit_where_textual_stacks_them():
    column = column_of(BLOCKS)
    tops, total = stacked(BLOCKS)
    assert [column.y(index) for index in range(len(BLOCKS))] == tops
    assert column.end() == total


def test_a_spacer_leaves_what_follows_it_in_place():
    column = column_of(BLOCKS)
    for first, last in itertools.combinations(range(len(BLOCKS) + 1), 2):
        for next_top in (None, 0, 1, 2):
            spacer = (column.gap(first, last, next_top), 0, 0)
            after = [(5, next_top, 1)] if next_top is not None else []
            with_blocks, total = stacked(BLOCKS + after)
            with_spacer, spaced_total = stacked([*BLOCKS[:first], spacer, *BLOCKS[last:], *after])
            # Every block after the spacer, and what follows the column, keeps its place.
            assert with_spacer[first + 1 :] == with_blocks[last:]
            assert spaced_total == total


def test_span_finds_the_blocks_in_a_range_of_rows():
    column = column_of(BLOCKS)
    tops, _ = stacked(BLOCKS)
    assert column.span(0, 0) == (0, 1)
    assert column.span(tops[3], tops[3] + 1) == (3, 4)
    assert column.span(tops[2] + 1, tops[4]) == (2, 5)
    assert column.span(10_000, 10_001)[0] == len(BLOCKS) - 1


def test_a_measured_height_moves_the_blocks_below():
    column = column_of(BLOCKS)
    before = column.y(5)
    assert column.measure(2, 10, 1, 1)
    assert not column.measure(2, 10, 1, 1)
    assert column.y(5) == before + 3


def test_estimates_count_code_lines_table_rows_and_wrapped_text():
    def first_block(text: str, width: int = 40) -> tuple[int, int, int]:
        return estimate(parser().parse(text), width)

    assert first_block("```\na\nb\nc\n```\n") == (5, 1, 1)
    assert first_block("| a |\n|---|\n| 1 |\n| 2 |\n") == (7, 0, 1)
    assert first_block("## Title\n") == (1, 2, 1)
    assert first_block("word " * 40)[0] >= 200 // 40
