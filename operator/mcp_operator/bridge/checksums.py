"""Checksums and structure rules of the identifiers the PII detectors look for.

Pure functions over already-extracted digits or characters; finding candidates in text is
:mod:`mcp_operator.bridge.pii_detectors`' job. A candidate counts as PII only when it passes these:
that is what keeps false positives low.
"""

from __future__ import annotations


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a string of digits."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


_CARD_BRANDS: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...] = (
    (("4",), (13, 16, 19)),  # Visa
    (tuple(str(p) for p in range(51, 56)) + tuple(str(p) for p in range(22, 28)), (16,)),
    (("34", "37"), (15,)),  # American Express
    (("6011", "65", "644", "645", "646", "647", "648", "649"), (16, 19)),  # Discover
    (("35",), (16, 19)),  # JCB
    (("36", "38", "300", "301", "302", "303", "304", "305"), (14,)),  # Diners Club
    (("62",), (16, 17, 18, 19)),  # UnionPay
)


def card_valid(digits: str) -> bool:
    """A payment card number: a known issuer prefix with its length, and Luhn."""
    brand_ok = any(
        digits.startswith(prefixes) and len(digits) in lengths for prefixes, lengths in _CARD_BRANDS
    )
    return brand_ok and luhn_valid(digits)


IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AT": 20, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21,
    "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FO": 18, "FR": 27,
    "GB": 22, "GI": 23, "GL": 18, "GR": 27, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26,
    "IT": 27, "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27,
    "ME": 22, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24, "TR": 26,
    "UA": 29, "VA": 22,
}  # fmt: skip
"""IBAN length per country (those in the SWIFT registry most often seen)."""


def iban_valid(compact: str) -> bool:
    """An IBAN without spaces: known country, its length, and the mod-97 check."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


def us_ssn_valid(area: str, group: str, serial: str) -> bool:
    """SSA rules: area not 000, 666 or 9xx; group not 00; serial not 0000."""
    return (
        area not in ("000", "666")
        and not area.startswith("9")
        and group != "00"
        and serial != "0000"
    )


def nl_bsn_valid(digits: str) -> bool:
    """The Dutch 11-test over 9 digits (weights 9..2 and -1), not all zeros."""
    if len(digits) != 9 or digits == "000000000":
        return False
    weights = (9, 8, 7, 6, 5, 4, 3, 2, -1)
    return sum(int(d) * w for d, w in zip(digits, weights, strict=True)) % 11 == 0


DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def es_dni_valid(number: str, letter: str) -> bool:
    """Spanish DNI: 8 digits and the control letter ``DNI_LETTERS[n % 23]``."""
    return DNI_LETTERS[int(number) % 23] == letter


def es_nie_valid(first: str, number: str, letter: str) -> bool:
    """Spanish NIE: X/Y/Z (0/1/2), 7 digits and the DNI control letter."""
    return es_dni_valid(str("XYZ".index(first)) + number, letter)
