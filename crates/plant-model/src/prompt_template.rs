//! The template of a prompt: its text with `{argument}` placeholders (`{{` and `}}` for braces
//! themselves), what the plant file's check reads and what rendering fills in, in one pass so a
//! value that holds braces is never read as a placeholder.

use std::ops::Range;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'t> {
    /// Text as it is (a doubled brace already made single).
    Text(&'t str),
    /// `{name}`, at its byte range in the template.
    Placeholder(&'t str, Range<usize>),
}

/// The pieces of `template`, in order.
fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest_start = 0;
    let mut index = 0;
    let bytes = template.as_bytes();
    while index < bytes.len() {
        match bytes[index] {
            brace @ (b'{' | b'}') if bytes.get(index + 1) == Some(&brace) => {
                pieces.push(Piece::Text(&template[rest_start..=index]));
                index += 2;
                rest_start = index;
            }
            b'{' => {
                let name_end = template[index + 1..]
                    .find(|character: char| !(character.is_ascii_alphanumeric() || character == '_'))
                    .map_or(bytes.len(), |end| index + 1 + end);
                if name_end > index + 1 && bytes.get(name_end) == Some(&b'}') {
                    pieces.push(Piece::Text(&template[rest_start..index]));
                    pieces.push(Piece::Placeholder(
                        &template[index + 1..name_end],
                        index..name_end + 1,
                    ));
                    index = name_end + 1;
                    rest_start = index;
                } else {
                    index += 1;
                }
            }
            _ => index += 1,
        }
    }
    pieces.push(Piece::Text(&template[rest_start..]));
    pieces
}

/// The `{name}` placeholders of `template`, each with its byte range, in order.
pub fn placeholders(template: &str) -> Vec<(&str, Range<usize>)> {
    pieces(template)
        .into_iter()
        .filter_map(|piece| match piece {
            Piece::Placeholder(name, range) => Some((name, range)),
            Piece::Text(_) => None,
        })
        .collect()
}

/// `template` with each placeholder replaced by `value(name)` (left as written when it gives
/// none) and each doubled brace made single.
pub fn fill_template<'v>(template: &str, value: impl Fn(&str) -> Option<&'v str>) -> String {
    let mut filled = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(text) => filled.push_str(text),
            Piece::Placeholder(name, range) => match value(name) {
                Some(value) => filled.push_str(value),
                None => filled.push_str(&template[range]),
            },
        }
    }
    filled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_names_in_braces_and_doubled_braces_are_braces() {
        let template = "Check {equipment} for {hours}h; {{not}} a {place holder} or {} or {x";
        let names: Vec<&str> = placeholders(template).into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["equipment", "hours"]);
        assert_eq!(placeholders(template)[0].1, 6..17);
        let filled = fill_template(template, |name| (name == "equipment").then_some("Pump1 {hours}"));
        assert_eq!(
            filled,
            "Check Pump1 {hours} for {hours}h; {not} a {place holder} or {} or {x"
        );
    }

    #[test]
    fn a_template_of_any_text_fills_without_panicking() {
        for template in ["", "{", "}", "{{", "}}", "{ä}", "{a", "ä{b}ö", "{{a}}", "{a}}"] {
            let filled = fill_template(template, |_| Some("v"));
            assert!(filled.len() <= template.len() + 1, "{template:?} gave {filled:?}");
        }
        assert_eq!(fill_template("{{a}}", |_| Some("v")), "{a}");
        assert_eq!(fill_template("ä{b}ö", |_| Some("v")), "ävö");
    }
}
