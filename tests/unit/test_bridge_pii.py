"""PII detectors and the JSON scanner (mcp_operator.bridge.pii and its parts): table tests
for each kind, false positives that checksums keep out, property tests with a bounded budget,
the bypass corpus of issue 17 and linear time."""

# The corpus is made of look-alike characters on purpose (fullwidth digits, dashes, dots).
# ruff: noqa: RUF001

from __future__ import annotations

import base64
import string
import time
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_operator.bridge.checksums import DNI_LETTERS, iban_valid, luhn_valid, nl_bsn_valid
from mcp_operator.bridge.pii import CHUNK_CHARS, PiiScanner, default_scanner
from mcp_operator.bridge.pii_detectors import (
    DetectorPluginError,
    builtin_detectors,
    load_plugin_detectors,
)
from mcp_operator.bridge.pii_leaves import normalise

SCANNER = PiiScanner(builtin_detectors())
BUDGET = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def kinds(text: str) -> dict[str, int]:
    return dict(SCANNER.scan(text).counts)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("write to alice.smith+tag@mail.example.com today", "email"),
        ("E.164: +31612345678", "phone"),
        ("call +1 (415) 555-0132", "phone"),
        ("ring +44 20 7946 0958", "phone"),
        ("US (212) 555-0123 or", "phone"),
        ("US 212-555-0123", "phone"),
        ("NL 06-12345678", "phone"),
        ("Berlin 030 12345678", "phone"),
        ("intl 0044 20 7946 0958", "phone"),
        ("visa 4111 1111 1111 1111", "card"),
        ("mc 5555-5555-5555-4444", "card"),
        ("amex 378282246310005", "card"),
        ("iban NL91ABNA0417164300", "iban"),
        ("iban NL91 ABNA 0417 1643 00.", "iban"),
        ("DE89 3704 0044 0532 0130 00", "iban"),
        ("GB82WEST12345698765432", "iban"),
        ("ssn 123-45-6789", "us_ssn"),
        ("bsn: 111222333", "nl_bsn"),
        ("Burgerservicenummer 123456782", "nl_bsn"),
        ("dotted 1112.22.333", "nl_bsn"),
        ("DNI 12345678Z", "es_dni"),
        ("NIE X1234567L", "es_nie"),
        ("NIE Y-1234567-X", "es_nie"),
        ("host 10.0.0.12 answered", "ipv4"),
        ("peer 2001:db8::8a2e:370:7334 answered", "ipv6"),
        ("link fe80::1ff:fe23:4567:890a%eth0", "ipv6"),
        ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334.", "ipv6"),
        ("mapped ::ffff:192.0.2.1", "ipv6"),
    ],
)
def test_each_kind_is_found(text: str, kind: str) -> None:
    assert kinds(text) == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112 (Luhn fails)",
        "ticket 1234567890123456",
        "iban NL92ABNA0417164300 (checksum fails)",
        "XX91ABNA0417164300 (no such country)",
        "ssn 000-45-6789",
        "ssn 666-45-6789",
        "ssn 923-45-6789",
        "ssn 123-00-6789",
        "ssn 123-45-0000",
        "bsn 111222334",
        "123456782 without a keyword",
        "DNI 12345678A (wrong letter)",
        "release v1.2.3.4 and 1.2.3.4.5",
        "999.1.1.1",
        "at 12:30:45 on 2024-01-15T10:30:00Z",
        "uuid 550e8400-e29b-41d4-a716-446655440000",
        "std::vector and Foo::Bar and a::b and dead::beef",
        "loopback ::1 and unspecified ::",
        "price 1,234,567.89 and 42",
        "id 1234567890",
        "ISBN 978-3-16-148410-0",
        "not an email: user@localhost, @handle, a@b",
        "sha abcdef0123456789abcdef0123456789abcdef01",
    ],
)
def test_lookalikes_are_not_findings(text: str) -> None:
    assert kinds(text) == {}


def test_known_checksums() -> None:
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")
    assert iban_valid("NL91ABNA0417164300") and not iban_valid("NL91ABNA0417164301")
    assert nl_bsn_valid("111222333") and not nl_bsn_valid("000000000")


def test_the_scanner_walks_nested_values_and_reports_counts_only() -> None:
    value = {
        "to": ["alice@example.com", "bob@example.com"],
        "meta": {"ip": "192.0.2.7", "n": 4111111111111111, "ok": True, "none": None, "f": 1.5},
    }
    report = SCANNER.scan(value)
    assert report.counts == {"email": 2, "ipv4": 1, "card": 1}
    assert report.value is value
    assert "alice" not in repr(report.counts)


def test_redact_rewrites_every_finding_and_leaves_the_rest() -> None:
    value = {"note": "mail alice@example.com from 10.1.2.3", "n": 4111111111111111, "keep": 7}
    report = SCANNER.scan(value, redact=True)
    assert report.value == {
        "note": "mail [REDACTED:email] from [REDACTED:ipv4]",
        "n": "[REDACTED:card]",
        "keep": 7,
    }
    assert value["note"] == "mail alice@example.com from 10.1.2.3"  # the input is untouched


def test_keys_are_scanned_and_redacted_without_losing_entries() -> None:
    report = SCANNER.scan({"a@example.com": 1, "b@example.com": 2}, redact=True)
    assert report.counts == {"email": 2}
    assert sorted(report.value.values()) == [1, 2]
    assert all("example.com" not in key for key in report.value)


def test_binary_image_and_audio_payloads_and_blobs_are_not_scanned_as_text() -> None:
    result = {
        "content": [
            {"type": "image", "mimeType": "image/png", "data": "+31612345678"},
            {"type": "resource", "resource": {"uri": "x:", "blob": "4111111111111111"}},
            {"type": "text", "text": "+31612345678"},
        ]
    }
    report = SCANNER.scan(result, redact=True)
    assert report.counts == {"phone": 1}
    assert report.value["content"][0]["data"] == "+31612345678"


def test_an_overlap_is_counted_once() -> None:
    # A card number in international-phone shape must not count twice.
    assert sum(kinds("+4111111111111111").values()) == 1


# plugins


class ColourDetector:
    kind = "colour"

    def find(self, text: str) -> list[tuple[int, int]]:
        start = text.find("magenta")
        return [] if start < 0 else [(start, start + 7)]


COLOUR = ColourDetector()


def point(value: str) -> EntryPoint:
    return EntryPoint(name="test", value=value, group="mcp_operator.pii_detectors")


def test_a_plugin_detector_is_loaded_from_an_entry_point() -> None:
    for value in (f"{__name__}:COLOUR", f"{__name__}:ColourDetector"):
        scanner = default_scanner([point(value)])
        report = scanner.scan({"x": "magenta and a@example.com"}, redact=True)
        assert report.counts == {"colour": 1, "email": 1}
        assert report.value == {"x": "[REDACTED:colour] and [REDACTED:email]"}


def test_a_broken_plugin_is_an_error_that_names_it() -> None:
    with pytest.raises(DetectorPluginError, match=r"test .*failed to load"):
        load_plugin_detectors([point(f"{__name__}:MISSING")])
    with pytest.raises(DetectorPluginError, match="is not a detector"):
        load_plugin_detectors([point("builtins:dict")])


def test_the_installed_entry_point_group_loads() -> None:
    assert [d.kind for d in default_scanner().detectors][:1] == ["email"]


# properties (bounded budget)


def luhn_complete(body: str) -> str:
    for check in string.digits:
        if luhn_valid(body + check):
            return body + check
    raise AssertionError("unreachable")


def iban(country: str, bban: str) -> str:
    number = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(number) % 97:02d}{bban}"


def bsn_complete(body: str) -> str | None:
    for last in string.digits:
        if nl_bsn_valid(body + last):
            return body + last
    return None


words = st.text(alphabet=string.ascii_letters + " ,;", max_size=20)


@BUDGET
@given(st.text(alphabet=string.digits, min_size=14, max_size=14), words, words)
def test_any_luhn_valid_visa_number_is_found(body: str, before: str, after: str) -> None:
    number = luhn_complete("4" + body)
    grouped = " ".join(number[i : i + 4] for i in range(0, 16, 4))
    for shown in (number, grouped):
        assert SCANNER.scan(f"{before} {shown} {after}").counts == {"card": 1}


@BUDGET
@given(st.text(alphabet=string.digits, min_size=14, max_size=14), st.integers(1, 9))
def test_a_visa_number_with_a_wrong_check_digit_is_not_a_card(body: str, shift: int) -> None:
    number = luhn_complete("4" + body)
    wrong = number[:-1] + str((int(number[-1]) + shift) % 10)
    assert "card" not in SCANNER.scan(f"ref {wrong}").counts


@BUDGET
@given(
    st.sampled_from(["NL", "DE", "GB"]),
    st.text(alphabet=string.digits, min_size=10, max_size=10),
    st.integers(0, 9),
    st.integers(1, 9),
)
def test_generated_ibans_are_found_and_one_changed_digit_is_not(
    country: str, digits: str, position: int, shift: int
) -> None:
    bban = {"NL": "ABNA" + digits, "DE": digits + "12345678", "GB": "WEST" + digits + "1234"}
    valid = iban(country, bban[country])
    assert SCANNER.scan(f"pay to {valid} now").counts == {"iban": 1}
    index = 4 + [i for i, c in enumerate(valid[4:]) if c.isdigit()][position % 6]
    changed = valid[:index] + str((int(valid[index]) + shift) % 10) + valid[index + 1 :]
    assert "iban" not in SCANNER.scan(f"pay to {changed} now").counts


@BUDGET
@given(st.text(alphabet=string.digits, min_size=8, max_size=8))
def test_a_bsn_after_its_keyword_is_found_only_when_it_passes_the_11_test(body: str) -> None:
    complete = bsn_complete(body)
    for last in string.digits:
        found = "nl_bsn" in SCANNER.scan(f"BSN {body}{last}").counts
        assert found == (body + last == complete and complete != "000000000")


@BUDGET
@given(st.integers(0, 99_999_999), st.sampled_from(DNI_LETTERS))
def test_a_dni_is_found_only_with_its_control_letter(number: int, letter: str) -> None:
    expected = DNI_LETTERS[number % 23] == letter
    assert ("es_dni" in SCANNER.scan(f"DNI {number:08d}{letter}").counts) == expected


local = st.text(alphabet=string.ascii_lowercase + string.digits + "._+", min_size=1, max_size=12)
domain = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=10)


@BUDGET
@given(local, domain, st.sampled_from(["com", "nl", "example"]), words, words)
def test_redacted_text_never_contains_the_email(
    user: str, host: str, tld: str, before: str, after: str
) -> None:
    address = f"{user}@{host}.{tld}"
    report = SCANNER.scan({"m": f"{before} {address} {after}"}, redact=True)
    assert report.counts.get("email") == 1
    assert address not in report.value["m"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@BUDGET
@given(json_values)
def test_any_json_value_scans_and_redaction_leaves_nothing_to_find(value: Any) -> None:
    detected = SCANNER.scan(value)
    assert detected.value is value
    redacted = SCANNER.scan(value, redact=True)
    assert redacted.counts == detected.counts
    assert SCANNER.scan(redacted.value).counts == {}


# -- the bypass corpus of issue 17: each one was missed in block mode, each is caught now ------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


BYPASSES: list[tuple[str, Any, str]] = [
    ("resource-blob-text", {"type": "resource", "resource": {
        "uri": "file:///a.txt", "mimeType": "text/plain",
        "blob": _b64("mail john.doe@example.com")}}, "email"),
    ("resource-blob-no-mime-type", {"type": "resource", "resource": {
        "uri": "x:", "blob": _b64("ssn 123-45-6789")}}, "us_ssn"),
    ("image-data-that-is-text", {"type": "image", "mimeType": "image/png",
                                 "data": _b64("card 4111 1111 1111 1111")}, "card"),
    ("audio-data-that-is-text", {"type": "audio", "mimeType": "audio/wav",
                                 "data": _b64("+31612345678")}, "phone"),
    ("float", {"n": 4111111111111111.0}, "card"),
    ("float-with-fraction", [4111111111111111.5], "card"),
    ("fullwidth-digits", "ssn １２３-４５-６７８９", "us_ssn"),
    ("arabic-indic-digits", "ssn ١٢٣-٤٥-٦٧٨٩", "us_ssn"),
    ("devanagari-digits", "card ४१११ ११११ ११११ ११११", "card"),
    ("fullwidth-at", "john.doe＠example.com", "email"),
    ("small-commercial-at", "john.doe﹫example.com", "email"),
    ("fullwidth-dots", "john．doe@example．com", "email"),
    ("dots-ssn", "ssn 123.45.6789", "us_ssn"),
    ("dots-phone", "call 415.555.0132", "phone"),
    ("dots-card", "4111.1111.1111.1111", "card"),
    ("en-dash-ssn", "ssn 123–45–6789", "us_ssn"),
    ("em-dash-phone", "+1 415—555—0132", "phone"),
    ("minus-sign-card", "5555−5555−5555−4444", "card"),
    ("zero-width-space-email", "john\u200b.doe@exa\u200bmple.com", "email"),
    ("zero-width-joiner-ssn", "123-\u200d45-6789", "us_ssn"),
    ("soft-hyphen-iban", "NL91\u00adABNA0417164300", "iban"),
    ("word-joiner-phone", "+316\u20601234\u20605678", "phone"),
    ("base64", "token " + _b64("john.doe@example.com"), "email"),
    ("base64-url-safe", base64.urlsafe_b64encode(b"ssn 123-45-6789 ~~??").decode(),
     "us_ssn"),
    ("split-email", {"user": "john.doe", "domain": "@example.com"}, "email"),
    ("split-ssn", ["123", "45", "6789"], "us_ssn"),
    ("split-card", {"a": "4111 1111", "b": "1111 1111"}, "card"),
    ("split-key-and-value", {"john.doe": "@example.com"}, "email"),
    ("split-after-a-long-text", ["x" * 5000 + " john.doe", "@example.com"], "email"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "kind"), [c[1:] for c in BYPASSES], ids=[c[0] for c in BYPASSES])
def test_each_bypass_of_the_corpus_is_found_and_redacted(value: Any, kind: str) -> None:
    report = SCANNER.scan(value)
    assert report.counts == {kind: 1}
    redacted = SCANNER.scan(value, redact=True)
    assert redacted.counts == {kind: 1}
    assert SCANNER.scan(redacted.value).counts == {}, redacted.value


def test_a_redacted_blob_is_still_base64_of_the_redacted_text() -> None:
    blob = _b64("mail john.doe@example.com please")
    value = {"type": "resource", "resource": {"uri": "x:", "mimeType": "text/plain", "blob": blob}}
    redacted = SCANNER.scan(value, redact=True).value["resource"]["blob"]
    assert base64.b64decode(redacted).decode() == "mail [REDACTED:email] please"


def test_redaction_maps_normalised_findings_back_onto_the_original_text() -> None:
    report = SCANNER.scan({"m": "a john\u200b.doe＠example.com b ١٢٣-٤٥-٦٧٨٩ c"}, redact=True)
    assert report.value == {"m": "a [REDACTED:email] b [REDACTED:us_ssn] c"}


def test_normalisation_folds_what_the_patterns_read_and_keeps_ascii_as_it_is() -> None:
    ascii_text = "plain ascii 123"
    assert normalise(ascii_text) is ascii_text
    assert normalise("１٢३＠．–—\u200b\u00ad。") == "123@.--."


def test_adjacent_fields_that_only_look_alike_are_not_findings() -> None:
    assert kinds(["alice@example.com", "bob@example.com"]) == {"email": 2}  # not a third
    assert SCANNER.scan({"title": "Order", "id": "A-1"}).counts == {}
    assert SCANNER.scan([123, 45, 6789]).counts == {}  # numbers do not join (documented)


def test_over_the_budget_the_scan_stops_and_says_so_and_redacts_what_it_scanned() -> None:
    small = PiiScanner(builtin_detectors(), max_chars=1000)
    head = "mail a@example.com "
    value = {"text": head + "x" * 2000 + " b@example.com"}
    report = small.scan(value, redact=True)
    assert report.unscanned and report.counts == {"email": 1}
    assert report.value["text"].startswith("mail [REDACTED:email] xxx")
    assert report.value["text"].endswith(" b@example.com")  # beyond the budget: as it was
    assert not small.scan({"text": "a@example.com"}).unscanned


def test_a_long_text_is_scanned_in_windows_with_the_same_findings() -> None:
    piece = "x" * (CHUNK_CHARS - 7) + " 4111 1111 1111 1111 and a.b@example.com "
    text = piece * 3
    whole = PiiScanner(builtin_detectors()).spans(text)
    assert SCANNER.find(text) == whole and len(whole) == 6


@pytest.mark.parametrize("unit", ["1 ", "1-", "a@", "a@b.", "1:", "Aa0+", "bsn ", "\u200b1."])
def test_scanning_time_is_linear_in_the_input(unit: str) -> None:
    def best(chars: int) -> float:
        """Seconds per scan, from rounds of at least 50 ms (a short scan alone is noise)."""
        text = unit * (chars // len(unit))
        times = []
        for _ in range(2):
            started, rounds = time.perf_counter(), 0
            while (spent := time.perf_counter() - started) < 0.05 or not rounds:
                SCANNER.scan({"v": text})
                rounds += 1
            times.append(spent / rounds)
        return min(times)

    # Both sizes are scanned in windows (CHUNK_CHARS), so the ratio compares like with like:
    # 8 times the input is 8 times the time when linear, 64 when quadratic (a busy machine
    # adds noise, hence the margin).
    small, large = best(CHUNK_CHARS + 16_000), best(8 * (CHUNK_CHARS + 16_000))
    assert large < 40 * small and large < 10, (small, large)


def test_scanning_time_is_linear_in_the_number_of_fields() -> None:
    def best(rows: int) -> float:
        value = [{"mail": f"user{i}@example.com", "note": "ok", "n": i} for i in range(rows)]
        times = []
        for _ in range(3):
            started = time.perf_counter()
            SCANNER.scan(value, redact=True)
            times.append(time.perf_counter() - started)
        return min(times)

    small, large = best(400), best(3200)
    # 8 times the fields: linear is 8 times the time, quadratic 64 (a busy machine and the
    # garbage collector add noise, hence the margin)
    assert large < 40 * max(small, 1e-4), (small, large)
