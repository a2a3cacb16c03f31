//! The built-in PII detectors (`bridge/pii_detectors.py`), compiled once: each a `kind` and
//! the spans it finds in a text already normalised. They favour precision: a candidate must
//! pass its checksum or structure rules (`checksums`) before it counts, and formats that are
//! only digits need context. Kinds: `email`, `phone`, `card`, `iban`, `us_ssn`, `nl_bsn`,
//! `es_dni`, `es_nie`, `ipv4`, `ipv6`. The patterns are the Python ones, lookarounds and
//! all, through `fancy-regex` (the `regex` crate has no lookaround), so a text is found
//! alike by both bridges. Spans are byte offsets.

use std::net::IpAddr;
use std::sync::LazyLock;

use fancy_regex::{Captures, Regex as Fancy};
use regex::Regex;

use super::checksums::{
    card_valid, es_dni_valid, es_nie_valid, iban_length, iban_valid, nl_bsn_valid, us_ssn_valid,
};

pub type Span = (usize, usize);

/// How one detector finds its candidates and checks them.
enum Finder {
    /// Every match of the pattern that passes the check.
    Pattern(Fancy, fn(&Captures<'_>) -> bool),
    Iban,
    Ipv6,
    Bsn,
}

/// Finds one kind of PII in a normalised text.
pub struct Detector {
    pub kind: &'static str,
    finder: Finder,
    /// Fewer ASCII digits than this in the text: nothing to find.
    pub min_digits: usize,
    /// A substring every finding contains.
    pub trigger: Option<&'static str>,
    /// A plain pattern every finding matches (the candidate without its lookarounds): run by
    /// `regex`'s automata, it spares most texts the backtracking of the full pattern.
    gate: Regex,
}

fn fancy(pattern: &str) -> Fancy {
    Fancy::new(pattern).expect("a built-in PII pattern compiles")
}

fn plain(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a built-in PII pattern compiles")
}

static EMAIL: (&str, &str) = (
    r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])",
    r"@[A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2}",
);
static PHONE: (&str, &str) = (
    r"(?<![\w+.:/-])(?:\+|00)?\(?\d[\d ()/.-]{6,20}\d(?![\w:/-]|\.\d)",
    r"\d[\d ()/.-]{6,20}\d",
);
static CARD: (&str, &str) = (
    r"(?<![\d-])\d(?:[ -]?\d){11,18}(?![\d]|-\d)",
    r"\d(?:[ -]?\d){11,18}",
);
static CARD_DOTTED: (&str, &str) = (
    r"(?<![\d.])\d{4}(?:\.\d{4}){2,3}(?![\d]|\.\d)",
    r"\d{4}(?:\.\d{4}){2,3}",
);
static SSN: (&str, &str) = (
    r"(?<![\d-])(?<!\d\.)(\d{3})([- .])(\d{2})\2(\d{4})(?![\d-])(?!\.\d)",
    r"\d{3}[- .]\d{2}[- .]\d{4}",
);
static DNI: (&str, &str) = (
    r"(?<![A-Za-z0-9])(\d{8})-?([A-Z])(?![A-Za-z0-9])",
    r"\d{8}-?[A-Z]",
);
static NIE: (&str, &str) = (
    r"(?<![A-Za-z0-9])([XYZ])-?(\d{7})-?([A-Z])(?![A-Za-z0-9])",
    r"[XYZ]-?\d{7}-?[A-Z]",
);
static IPV4: (&str, &str) = (
    r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)",
    r"(?:\d{1,3}\.){3}\d{1,3}",
);

static BSN_GATE: &str = r"\d{4}\.\d{2}\.\d{3}|(?i:bsn|burgerservicenummer|sofi-?nummer)";
static IBAN: LazyLock<Fancy> = LazyLock::new(|| fancy(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}"));
static IPV6: LazyLock<Fancy> = LazyLock::new(|| {
    fancy(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4})(?![\w:])")
});
static BSN_DOTTED: LazyLock<Fancy> = LazyLock::new(|| fancy(r"(?<![\d.])\d{4}\.\d{2}\.\d{3}(?![\d.])"));
static BSN_KEYWORD: LazyLock<Fancy> = LazyLock::new(|| {
    fancy(r"(?i:\b(?:bsn|burgerservicenummer|sofi-?nummer)\b)[^0-9]{0,24}(?<!\d)(\d{9})(?!\d)")
});
static NANP: LazyLock<Regex> = LazyLock::new(|| plain(r"^(?:\(?[2-9]\d{2}\)?[ .-]?[2-9]\d{2}[ .-]\d{4})$"));
static TRUNK: LazyLock<Regex> = LazyLock::new(|| plain(r"^(?:\(?0\d{1,4}\)?(?:[ /.-]?\d{2,4}){2,4})$"));

/// ASCII digits in `text` (most texts have too few for any digit-based kind, and then those
/// detectors are skipped without running their patterns).
pub fn digit_count(text: &str) -> usize {
    text.bytes().filter(u8::is_ascii_digit).count()
}

fn digits(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

fn group<'t>(captures: &Captures<'t>, index: usize) -> &'t str {
    captures.get(index).map_or("", |m| m.as_str())
}

fn whole<'t>(captures: &Captures<'t>) -> &'t str {
    group(captures, 0)
}

fn always(_: &Captures<'_>) -> bool {
    true
}

fn phone(captures: &Captures<'_>) -> bool {
    let candidate = whole(captures).trim();
    let found = digits(candidate);
    let all_digits = !candidate.is_empty() && candidate.bytes().all(|b| b.is_ascii_digit());
    if candidate.starts_with('+') {
        return (8..=15).contains(&found.len()) && !found.starts_with('0');
    }
    if candidate.starts_with("00") {
        return found.len() >= 2
            && (8..=15).contains(&(found.len() - 2))
            && found.as_bytes().get(2) != Some(&b'0')
            && !all_digits;
    }
    if NANP.is_match(candidate) {
        return true;
    }
    !all_digits && (9..=11).contains(&found.len()) && TRUNK.is_match(candidate)
}

fn card(captures: &Captures<'_>) -> bool {
    card_valid(&digits(whole(captures)))
}

fn ssn(captures: &Captures<'_>) -> bool {
    us_ssn_valid(group(captures, 1), group(captures, 3), group(captures, 4))
}

fn dni(captures: &Captures<'_>) -> bool {
    es_dni_valid(group(captures, 1), group(captures, 2))
}

fn nie(captures: &Captures<'_>) -> bool {
    es_nie_valid(group(captures, 1), group(captures, 2), group(captures, 3))
}

fn ip(captures: &Captures<'_>) -> bool {
    whole(captures).parse::<IpAddr>().is_ok()
}

/// A valid IPv6 address with at least three groups written out, or an IPv4 tail: so `::1`
/// (loopback, not personal) and `a::b` (a path in code) are not findings.
fn ipv6(captures: &Captures<'_>) -> bool {
    let candidate = whole(captures);
    let groups = candidate.split(':').filter(|g| !g.is_empty()).count();
    ip(captures) && (groups >= 3 || candidate.contains('.'))
}

/// Every match of `pattern` in `text` that passes `check` (a pattern that fails on the
/// backtracking budget finds nothing more in this text).
fn matches(pattern: &Fancy, text: &str, check: fn(&Captures<'_>) -> bool) -> Vec<Span> {
    pattern
        .captures_iter(text)
        .map_while(Result::ok)
        .filter(|c| check(c))
        .filter_map(|c| c.get(0).map(|m| (m.start(), m.end())))
        .collect()
}

/// IBANs, compact or in groups of four; the country's length decides where one ends.
fn ibans(text: &str) -> Vec<Span> {
    let mut found = Vec::new();
    for m in IBAN.find_iter(text).map_while(Result::ok) {
        let candidate = m.as_str();
        let Some(expected) = iban_length(&candidate[..2]) else {
            continue;
        };
        let (mut taken, mut end) = (0, m.start());
        for (index, c) in candidate.char_indices() {
            if c != ' ' {
                taken += 1;
            }
            if taken == expected {
                end = m.start() + index + c.len_utf8();
                break;
            }
        }
        let compact: String = text[m.start()..end].chars().filter(|c| *c != ' ').collect();
        if taken == expected && iban_valid(&compact) {
            found.push((m.start(), end));
        }
    }
    found
}

/// IPv6 addresses: only in a text with `::` or at least seven colons.
fn ipv6s(text: &str) -> Vec<Span> {
    if !text.contains("::") && text.matches(':').count() < 7 {
        return Vec::new();
    }
    matches(&IPV6, text, ipv6)
}

/// Dutch BSN: dotted (`1234.56.782`) anywhere, nine bare digits only after a keyword.
fn bsns(text: &str) -> Vec<Span> {
    let mut found: Vec<Span> = BSN_DOTTED
        .find_iter(text)
        .map_while(Result::ok)
        .filter(|m| nl_bsn_valid(&digits(m.as_str())))
        .map(|m| (m.start(), m.end()))
        .collect();
    for captures in BSN_KEYWORD.captures_iter(text).map_while(Result::ok) {
        if let Some(number) = captures.get(1)
            && nl_bsn_valid(number.as_str())
        {
            found.push((number.start(), number.end()));
        }
    }
    found
}

impl Detector {
    fn pattern(
        kind: &'static str,
        (pattern, gate): (&str, &str),
        check: fn(&Captures<'_>) -> bool,
        min_digits: usize,
        trigger: Option<&'static str>,
    ) -> Self {
        Self::custom(
            kind,
            Finder::Pattern(fancy(pattern), check),
            gate,
            min_digits,
            trigger,
        )
    }

    fn custom(
        kind: &'static str,
        finder: Finder,
        gate: &str,
        min_digits: usize,
        trigger: Option<&'static str>,
    ) -> Self {
        Self {
            kind,
            finder,
            min_digits,
            trigger,
            gate: plain(gate),
        }
    }

    /// `(start, end)` of every occurrence in `text`.
    pub fn find(&self, text: &str) -> Vec<Span> {
        if !self.gate.is_match(text) {
            return Vec::new();
        }
        match &self.finder {
            Finder::Pattern(pattern, check) => matches(pattern, text, *check),
            Finder::Iban => ibans(text),
            Finder::Ipv6 => ipv6s(text),
            Finder::Bsn => bsns(text),
        }
    }
}

/// The built-in detectors, most specific first (it wins where two overlap).
pub fn builtin() -> Vec<Detector> {
    vec![
        Detector::pattern("email", EMAIL, always, 0, Some("@")),
        Detector::custom("iban", Finder::Iban, r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11}", 4, None),
        Detector::pattern("card", CARD, card, 12, None),
        Detector::pattern("card", CARD_DOTTED, card, 12, Some(".")),
        Detector::pattern("us_ssn", SSN, ssn, 9, None),
        Detector::custom("nl_bsn", Finder::Bsn, BSN_GATE, 9, None),
        Detector::pattern("es_dni", DNI, dni, 8, None),
        Detector::pattern("es_nie", NIE, nie, 7, None),
        Detector::pattern("ipv4", IPV4, ip, 4, Some(".")),
        Detector::custom(
            "ipv6",
            Finder::Ipv6,
            r"[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:",
            0,
            Some(":"),
        ),
        Detector::pattern("phone", PHONE, phone, 8, None),
    ]
}
