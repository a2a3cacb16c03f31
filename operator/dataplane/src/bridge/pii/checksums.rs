//! The checksums and structure rules of the identifiers the PII detectors look for
//! (`bridge/checksums.py`): pure functions over digits or characters already extracted. A
//! candidate counts as PII only when it passes these: that keeps false positives low.

/// The Luhn check of a string of ASCII digits.
pub fn luhn_valid(digits: &str) -> bool {
    let mut total = 0u32;
    for (index, byte) in digits.bytes().rev().enumerate() {
        let mut value = u32::from(byte.wrapping_sub(b'0'));
        if index % 2 == 1 {
            value = if value > 4 { value * 2 - 9 } else { value * 2 };
        }
        total += value;
    }
    total.is_multiple_of(10)
}

/// Issuer prefixes and the lengths they come in.
const CARD_BRANDS: &[(&[&str], &[usize])] = &[
    (&["4"], &[13, 16, 19]), // Visa
    (
        &["51", "52", "53", "54", "55", "22", "23", "24", "25", "26", "27"],
        &[16],
    ), // Mastercard
    (&["34", "37"], &[15]),  // American Express
    (
        &["6011", "65", "644", "645", "646", "647", "648", "649"],
        &[16, 19],
    ), // Discover
    (&["35"], &[16, 19]),    // JCB
    (&["36", "38", "300", "301", "302", "303", "304", "305"], &[14]), // Diners Club
    (&["62"], &[16, 17, 18, 19]), // UnionPay
];

/// A payment card number: a known issuer prefix with its length, and Luhn.
pub fn card_valid(digits: &str) -> bool {
    let brand = CARD_BRANDS.iter().any(|(prefixes, lengths)| {
        prefixes.iter().any(|p| digits.starts_with(p)) && lengths.contains(&digits.len())
    });
    brand && luhn_valid(digits)
}

/// IBAN length per country (those in the SWIFT registry most often seen).
pub fn iban_length(country: &str) -> Option<usize> {
    #[rustfmt::skip]
    const LENGTHS: &[(&str, usize)] = &[
        ("AD", 24), ("AE", 23), ("AT", 20), ("BA", 20), ("BE", 16), ("BG", 22), ("BH", 22),
        ("BR", 29), ("CH", 21), ("CY", 28), ("CZ", 24), ("DE", 22), ("DK", 18), ("EE", 20),
        ("ES", 24), ("FI", 18), ("FO", 18), ("FR", 27), ("GB", 22), ("GI", 23), ("GL", 18),
        ("GR", 27), ("HR", 21), ("HU", 28), ("IE", 22), ("IL", 23), ("IS", 26), ("IT", 27),
        ("KW", 30), ("KZ", 20), ("LB", 28), ("LI", 21), ("LT", 20), ("LU", 20), ("LV", 21),
        ("MC", 27), ("ME", 22), ("MT", 31), ("MU", 30), ("NL", 18), ("NO", 15), ("PK", 24),
        ("PL", 28), ("PT", 25), ("QA", 29), ("RO", 24), ("RS", 22), ("SA", 24), ("SE", 24),
        ("SI", 19), ("SK", 24), ("SM", 27), ("TN", 24), ("TR", 26), ("UA", 29), ("VA", 22),
    ];
    LENGTHS
        .iter()
        .find(|(code, _)| *code == country)
        .map(|(_, length)| *length)
}

/// An IBAN without spaces: known country, its length, and the mod-97 check.
pub fn iban_valid(compact: &str) -> bool {
    if !compact.is_ascii()
        || compact.len() < 4
        || iban_length(&compact[..2]) != Some(compact.len())
        || !compact[2..4].bytes().all(|b| b.is_ascii_digit())
    {
        return false;
    }
    let mut remainder = 0u64;
    for c in compact[4..].chars().chain(compact[..4].chars()) {
        let Some(value) = c.to_digit(36) else {
            return false;
        };
        remainder = if value >= 10 {
            (remainder * 100 + u64::from(value)) % 97
        } else {
            (remainder * 10 + u64::from(value)) % 97
        };
    }
    remainder == 1
}

/// SSA rules: area not 000, 666 or 9xx; group not 00; serial not 0000.
pub fn us_ssn_valid(area: &str, group: &str, serial: &str) -> bool {
    area != "000" && area != "666" && !area.starts_with('9') && group != "00" && serial != "0000"
}

/// The Dutch 11-test over 9 digits (weights 9..2 and -1), not all zeros.
pub fn nl_bsn_valid(digits: &str) -> bool {
    if digits.len() != 9 || digits == "000000000" || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let weights = [9i64, 8, 7, 6, 5, 4, 3, 2, -1];
    let sum: i64 = digits
        .bytes()
        .zip(weights)
        .map(|(d, w)| i64::from(d - b'0') * w)
        .sum();
    sum.rem_euclid(11) == 0
}

pub const DNI_LETTERS: &str = "TRWAGMYFPDXBNJZSQVHLCKE";

/// Spanish DNI: 8 digits and the control letter `DNI_LETTERS[n % 23]`.
pub fn es_dni_valid(number: &str, letter: &str) -> bool {
    let Ok(n) = number.parse::<u64>() else {
        return false;
    };
    let index = usize::try_from(n % 23).unwrap_or_default();
    DNI_LETTERS.get(index..=index) == Some(letter)
}

/// Spanish NIE: X/Y/Z (0/1/2), 7 digits and the DNI control letter.
pub fn es_nie_valid(first: &str, number: &str, letter: &str) -> bool {
    match "XYZ".find(first) {
        Some(index) if first.len() == 1 => es_dni_valid(&format!("{index}{number}"), letter),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_checksums() {
        assert!(luhn_valid("79927398713") && !luhn_valid("79927398710"));
        assert!(iban_valid("NL91ABNA0417164300") && !iban_valid("NL91ABNA0417164301"));
        assert!(nl_bsn_valid("111222333") && !nl_bsn_valid("000000000"));
        assert!(card_valid("4111111111111111") && !card_valid("1234567890123456"));
        assert!(es_dni_valid("12345678", "Z") && !es_dni_valid("12345678", "A"));
        assert!(es_nie_valid("X", "1234567", "L"));
        assert!(!us_ssn_valid("666", "45", "6789") && us_ssn_valid("123", "45", "6789"));
    }
}
