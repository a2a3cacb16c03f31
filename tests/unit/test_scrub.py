"""The scrubber masks a secret value in every form a server would echo it in."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from mcp_operator.mcp.errors import ProbeError, scrub
from mcp_operator.mcp.scrub import Scrubber

TOKEN = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=40
)
AROUND = st.text(alphabet="abc XYZ:/=", max_size=20)


def encodings(value: str) -> list[str]:
    return [
        value,
        value.upper(),
        value.lower(),
        quote(value, safe=""),
        json.dumps(value)[1:-1],
        base64.b64encode(value.encode()).decode(),
        base64.urlsafe_b64encode(value.encode()).decode().rstrip("="),
    ]


@given(TOKEN, AROUND, AROUND, st.integers(min_value=0, max_value=6))
def test_every_form_of_a_value_is_masked_wherever_it_sits(
    value: str, before: str, after: str, form: int
) -> None:
    echoed = encodings(value)[form]
    scrubbed = Scrubber([value])(before + echoed + after)
    assert echoed.lower() not in scrubbed.lower()
    assert "***" in scrubbed


@given(TOKEN, st.text(alphabet="abcdefgh: ", max_size=12))
def test_base64_of_a_longer_text_is_masked_at_any_alignment(value: str, prefix: str) -> None:
    blob = base64.b64encode(f"{prefix}{value}".encode()).decode()
    scrubbed = Scrubber([value])(f"blob {blob}")
    assert blob not in scrubbed


@given(TOKEN)
def test_a_value_cut_at_the_end_of_a_text_is_masked(value: str) -> None:
    text = "description: " + value[: max(8, len(value) - 3)] + "…"
    assert value[:8] not in Scrubber([value])(text)


def test_each_long_token_of_a_value_is_masked_on_its_own() -> None:
    mask = Scrubber(["Bearer abcdefgh12345"])
    assert mask("token abcdefgh12345 seen") == "token *** seen"
    assert mask("Bearer is a word") == "Bearer is a word"  # shorter than 8: not on its own


def test_short_values_and_no_values_change_nothing() -> None:
    assert Scrubber(["abc"])("abc abc") == "abc abc"
    assert not Scrubber([])
    assert Scrubber([])("anything") == "anything"


def test_a_probe_error_is_scrubbed_in_any_case() -> None:
    error = ProbeError("ServerError", "server said: BEARER TOPSECRET-VALUE-1 is wrong")
    assert scrub(error, {"Authorization": "Bearer topsecret-value-1"}).message == (
        "server said: *** is wrong"
    )
