"""The bridge's own cursor: what it makes comes back; anything else is refused."""

from __future__ import annotations

import pytest

from mcp_operator.bridge.cursor import MAX_CURSOR_CHARS, CursorCodec, InvalidCursor, Position


def test_a_cursor_gives_back_the_position_it_was_made_for() -> None:
    codec = CursorCodec()
    for position in (Position("ns/a", None), Position("ns/b", ""), Position("ns/b", "é:1")):
        assert codec.decode("resources/list", codec.encode("resources/list", position)) == position


@pytest.mark.parametrize(
    "cursor",
    ["", "x", "abc.def", "..", 5, None, "a" * (MAX_CURSOR_CHARS + 1), "!!!.???"],
)
def test_a_cursor_the_codec_did_not_make_is_refused(cursor: object) -> None:
    with pytest.raises(InvalidCursor):
        CursorCodec().decode("resources/list", cursor)


def test_an_altered_cursor_is_refused_however_little_changed() -> None:
    codec = CursorCodec()
    cursor = codec.encode("resources/list", Position("ns/a", "page-2"))
    body, _, mac = cursor.partition(".")
    for altered in (
        body[:-1] + ("A" if body[-1] != "A" else "B") + "." + mac,
        body + "." + mac[:-1] + ("A" if mac[-1] != "A" else "B"),
        body + ".",
        cursor[:-2],
    ):
        with pytest.raises(InvalidCursor):
            codec.decode("resources/list", altered)


def test_a_cursor_of_another_listing_or_another_bridge_is_refused() -> None:
    codec = CursorCodec()
    cursor = codec.encode("resources/list", Position("ns/a", None))
    with pytest.raises(InvalidCursor, match="belongs to resources/list"):
        codec.decode("resources/templates/list", cursor)
    with pytest.raises(InvalidCursor):
        CursorCodec().decode("resources/list", cursor)  # another key: another process
