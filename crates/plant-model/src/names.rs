//! Names as people see them: one form for what looks the same (Unicode NFC, so a composed and a
//! decomposed accent, or the Kelvin sign and `K`, are one name), one key for what differs only
//! in case (full Unicode case folding, so `STRAẞE` and `straße` or `ΣΊΣΥΦΟΣ` and `σίσυφος` are
//! one name), and no characters that hide or reorder what is shown (controls, bidirectional
//! overrides and marks, invisible joiners), nor names that mix scripts within a part (a Cyrillic
//! `р` in a Latin `Pump1`).

use unicase::UniCase;
use unicode_normalization::UnicodeNormalization;
use unicode_script::{Script, UnicodeScript};
use unicode_security::MixedScript;

/// `text` in Unicode Normalization Form C: how the plant stores every name and path.
pub fn normalize(text: &str) -> String {
    text.nfc().collect()
}

/// The key two names are the same by, ignoring case: `text` normalized (NFC) and case-folded
/// (full Unicode folding, not ASCII only). Lookups of tags by name or path use it too.
pub fn fold(text: &str) -> String {
    UniCase::unicode(normalize(text)).to_folded_case()
}

/// The word of `known` closest to `word` ignoring case and composition, when it is near enough
/// to be a typo (at most a third of its characters apart): the "did you mean" of every error
/// that names something unknown.
pub fn nearest<'k>(word: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    let word = fold(word);
    known
        .into_iter()
        .map(|candidate| (strsim::levenshtein(&word, &fold(candidate)), candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.chars().count() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// How an error quotes a suggested name: a key of the file as the format's documentation writes
/// keys (`` `limit` ``), a value as the string it is written as (`"HiHi"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quote {
    /// `` `limit` ``: a key.
    Backticks,
    /// `"HiHi"`: a value.
    DoubleQuotes,
}

/// ` (did you mean `near`?)` or ` (did you mean "near"?)` for the name of `known` nearest
/// `name`, or nothing when none is near: the hint of every error about a name that is none of
/// the names it may be (a table's keys, the tag types, the plant's sources, a tag's values).
pub(crate) fn did_you_mean<'k>(name: &str, known: impl IntoIterator<Item = &'k str>, quote: Quote) -> String {
    nearest(name, known)
        .map(|near| match quote {
            Quote::Backticks => format!(" (did you mean `{near}`?)"),
            Quote::DoubleQuotes => format!(" (did you mean {near:?}?)"),
        })
        .unwrap_or_default()
}

/// The key two names look the same by: the confusable skeleton (Unicode UTS #39) of the name,
/// folded, and skeletoned again (capitals of other scripts look like Latin capitals, their small
/// letters less so; folding between the two keeps `PUMP1` and `pump1` one key), so `TOP`
/// written in Cyrillic, or `Pump1` with a Greek `Ρ`, has the key of the Latin one.
pub(crate) fn look_alike(text: &str) -> String {
    let skeleton: String = unicode_security::skeleton(&normalize(text)).collect();
    unicode_security::skeleton(&fold(&skeleton)).collect()
}

/// The name of a character that may hide or reorder what a name shows, if `c` is one.
fn hidden(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{00AD}' => "SOFT HYPHEN",
        '\u{034F}' => "COMBINING GRAPHEME JOINER",
        '\u{061C}' => "ARABIC LETTER MARK",
        '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' => "HANGUL FILLER",
        '\u{180E}' => "MONGOLIAN VOWEL SEPARATOR",
        '\u{200B}' => "ZERO WIDTH SPACE",
        '\u{200C}' => "ZERO WIDTH NON-JOINER",
        '\u{200D}' => "ZERO WIDTH JOINER",
        '\u{200E}' => "LEFT-TO-RIGHT MARK",
        '\u{200F}' => "RIGHT-TO-LEFT MARK",
        '\u{202A}' => "LEFT-TO-RIGHT EMBEDDING",
        '\u{202B}' => "RIGHT-TO-LEFT EMBEDDING",
        '\u{202C}' => "POP DIRECTIONAL FORMATTING",
        '\u{202D}' => "LEFT-TO-RIGHT OVERRIDE",
        '\u{202E}' => "RIGHT-TO-LEFT OVERRIDE",
        '\u{2060}' => "WORD JOINER",
        '\u{2061}'..='\u{2064}' => "an invisible operator",
        '\u{2066}' => "LEFT-TO-RIGHT ISOLATE",
        '\u{2067}' => "RIGHT-TO-LEFT ISOLATE",
        '\u{2068}' => "FIRST STRONG ISOLATE",
        '\u{2069}' => "POP DIRECTIONAL ISOLATE",
        '\u{206A}'..='\u{206F}' => "a deprecated format character",
        '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}' => "a variation selector",
        '\u{FEFF}' => "ZERO WIDTH NO-BREAK SPACE",
        '\u{E0000}'..='\u{E007F}' => "a tag character",
        c if c.is_control() => "a control character",
        c if c.is_whitespace() => "a space",
        _ => return None,
    })
}

/// What is wrong with a text value (a text tag's, as written or proposed), if anything: a
/// control, bidirectional or invisible character (named, with its place), which would make the
/// value read as something else to the operator approving or reading it. Spaces of every kind
/// but the line and paragraph separators are text.
pub fn text_value_problem(text: &str) -> Option<String> {
    text.chars().enumerate().find_map(|(position, c)| {
        let what = match c {
            '\u{2028}' => "LINE SEPARATOR",
            '\u{2029}' => "PARAGRAPH SEPARATOR",
            c if c.is_whitespace() && !c.is_control() => return None,
            c => hidden(c)?,
        };
        Some(format!(
            "character {} is U+{:04X} ({what}), which hides or reorders what the value shows: \
             text values hold no control, bidirectional or invisible characters",
            position + 1,
            u32::from(c)
        ))
    })
}

/// Why `text` cannot be written to a text tag whose set of values is `values`, if it cannot:
/// it is not one of them (with the nearest as a hint: `manual` for `Manual`). An empty set
/// allows any text.
pub fn outside_values(values: &[String], text: &str) -> Option<String> {
    if values.is_empty() || values.iter().any(|value| value == text) {
        return None;
    }
    let hint = did_you_mean(text, values.iter().map(String::as_str), Quote::DoubleQuotes);
    Some(format!("{text:?} is not one of {}{hint}", values.join(", ")))
}

/// What is wrong with a name or path (already normalized), if anything: a character that
/// hides or reorders what it shows (named, with its place), or a part (between `.` and `/`)
/// that mixes scripts. `spaces` says whether spaces are allowed (inside path segments).
pub(crate) fn problem(name: &str, spaces: bool) -> Option<String> {
    for (position, c) in name.chars().enumerate() {
        if spaces && c == ' ' {
            continue;
        }
        if let Some(what) = hidden(c) {
            return Some(format!(
                "character {} is U+{:04X} ({what}), which hides or reorders what a name shows",
                position + 1,
                u32::from(c)
            ));
        }
    }
    for part in name.split(['.', '/']) {
        if !part.is_single_script() {
            let mut scripts: Vec<&str> = Vec::new();
            for c in part.chars() {
                let script = c.script();
                if !matches!(script, Script::Common | Script::Inherited | Script::Unknown)
                    && !scripts.contains(&script.full_name())
                {
                    scripts.push(script.full_name());
                }
            }
            return Some(format!(
                "{part:?} mixes scripts ({}), so it can look like another name: write each part in one script",
                scripts.join(", ")
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_looks_the_same_is_one_name() {
        assert_eq!(normalize("Cafe\u{301}"), "Caf\u{e9}");
        assert_eq!(normalize("\u{212A}iln.Temp"), "Kiln.Temp", "the Kelvin sign is K");
        assert_eq!(fold("STRASSE"), fold("stra\u{df}e"));
        assert_eq!(fold("\u{3a3}\u{399}\u{3a3}"), fold("\u{3c3}\u{3b9}\u{3c2}"));
        assert_eq!(fold("Caf\u{c9}"), fold("cafe\u{301}"));
        assert_eq!(look_alike("\u{420}ump1"), look_alike("Pump1"), "a Cyrillic Р");
        assert_eq!(
            look_alike("\u{422}\u{41e}\u{420}"),
            look_alike("top"),
            "TOP in Cyrillic"
        );
        assert_eq!(look_alike("PUMP1"), look_alike("pump1"));
        assert_ne!(look_alike("Pump1"), look_alike("Pump2"));
    }

    #[test]
    fn typos_get_the_nearest_known_word() {
        assert_eq!(nearest("limt", ["limit", "tag"]), Some("limit"));
        assert_eq!(nearest("HIHI", crate::Condition::NAMES), Some("HiHi"));
        assert_eq!(nearest("colour", ["limit", "tag"]), None);
    }

    #[test]
    fn a_suggestion_is_quoted_as_a_key_or_as_a_value() {
        let known = ["limit", "tag"];
        assert_eq!(
            did_you_mean("limt", known, Quote::Backticks),
            " (did you mean `limit`?)"
        );
        assert_eq!(
            did_you_mean("limt", known, Quote::DoubleQuotes),
            " (did you mean \"limit\"?)"
        );
        assert_eq!(did_you_mean("colour", known, Quote::Backticks), "");
    }

    #[test]
    fn text_values_refuse_what_hides_or_reorders_and_keep_spaces() {
        assert_eq!(text_value_problem("Off"), None);
        assert_eq!(text_value_problem("Pump 1\u{00A0}off, Café"), None);
        for (text, named) in [
            ("Off\u{202E}", "character 4 is U+202E (RIGHT-TO-LEFT OVERRIDE)"),
            ("a\nb", "character 2 is U+000A (a control character)"),
            ("\u{200B}On", "character 1 is U+200B (ZERO WIDTH SPACE)"),
            ("On\u{2028}Off", "character 3 is U+2028 (LINE SEPARATOR)"),
            ("x\u{2066}y", "LEFT-TO-RIGHT ISOLATE"),
        ] {
            let problem = text_value_problem(text).unwrap_or_else(|| panic!("{text:?} refused"));
            assert!(problem.contains(named), "{problem}");
        }
    }

    #[test]
    fn hidden_characters_and_mixed_scripts_are_named() {
        assert_eq!(
            problem("Tank\u{202E}1", false).as_deref(),
            Some("character 5 is U+202E (RIGHT-TO-LEFT OVERRIDE), which hides or reorders what a name shows")
        );
        assert_eq!(
            problem("P\u{443}mp1.Level", false),
            Some(format!(
                "{:?} mixes scripts (Latin, Cyrillic), so it can look like another name: write each part in one script",
                "P\u{443}mp1"
            ))
        );
        assert_eq!(problem("Насос1.Temp", false), None, "one script per part");
        assert_eq!(problem("Plant/Area 1/Pump1", true), None);
        assert!(problem("Tank 1", false).is_some());
        assert_eq!(problem("ポンプ1.温度", false), None, "Japanese is one script set");
    }
}
