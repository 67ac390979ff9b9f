//! The small language of an alarm's `suppress_when`: tags compared with values, joined by
//! `and`, `or` and `not`. Parsed with winnow, printed back in one canonical form, and evaluated
//! in three-valued logic, so a tag whose value is not known never suppresses an alarm.
//!
//! ```text
//! expression := conjunction ("or" conjunction)*
//! conjunction := negation ("and" negation)*
//! negation   := "not" negation | "(" expression ")" | tag [comparison value]
//! comparison := "==" | "!=" | "<" | "<=" | ">" | ">="
//! value      := number | "true" | "false" | "\"text\""
//! tag        := a tag's name (`Pump1.Running`), or any name in backticks
//! ```
//!
//! A tag alone is a bool tag that is true. `not` binds tightest, then `and`, then `or`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use winnow::combinator::{
    alt, cut_err, delimited, eof, fail, opt, peek, preceded, separated_foldl1, terminated,
};
use winnow::error::{ContextError, ErrMode, StrContext, StrContextValue};
use winnow::prelude::*;
use winnow::token::{none_of, one_of, take_while};

/// The words the language keeps for itself: a tag of one of these names is written in backticks.
const KEYWORDS: [&str; 5] = ["and", "or", "not", "true", "false"];

/// The longest expression, in characters: one an engineer can still read on one line or three.
pub const MAX_EXPRESSION_CHARS: usize = 1000;

/// A value a tag is compared with, or a tag's value as the expression sees it (an integer tag's
/// value is a number).
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A number: `10`, `-2.5`, `1e3`.
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A text in double quotes: `"Manual"`.
    Text(String),
}

impl Operand {
    /// `number`, `bool` or `text`, as errors name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Number(_) => "number",
            Self::Bool(_) => "bool",
            Self::Text(_) => "text",
        }
    }
}

/// How a tag is compared with a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
}

impl Comparison {
    /// Every comparison.
    pub const ALL: [Self; 6] = [
        Self::Equal,
        Self::NotEqual,
        Self::Less,
        Self::LessOrEqual,
        Self::Greater,
        Self::GreaterOrEqual,
    ];

    /// How the language writes it.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Equal => "==",
            Self::NotEqual => "!=",
            Self::Less => "<",
            Self::LessOrEqual => "<=",
            Self::Greater => ">",
            Self::GreaterOrEqual => ">=",
        }
    }

    /// Whether it orders values (numbers only) rather than telling them equal or not.
    pub fn orders(self) -> bool {
        !matches!(self, Self::Equal | Self::NotEqual)
    }

    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Self::Equal => ordering == Equal,
            Self::NotEqual => ordering != Equal,
            Self::Less => ordering == Less,
            Self::LessOrEqual => ordering != Greater,
            Self::Greater => ordering == Greater,
            Self::GreaterOrEqual => ordering != Less,
        }
    }
}

/// A parsed `suppress_when`.
#[derive(Debug, Clone, PartialEq)]
pub enum TagExpression {
    /// `Pump1.Running`: a bool tag that is true.
    Is(String),
    /// `Tank1.Level < 10`.
    Compare {
        /// The tag's name.
        tag: String,
        /// How it is compared.
        comparison: Comparison,
        /// With what.
        value: Operand,
    },
    /// `not …`
    Not(Box<TagExpression>),
    /// `… and …`
    And(Box<TagExpression>, Box<TagExpression>),
    /// `… or …`
    Or(Box<TagExpression>, Box<TagExpression>),
}

/// Why a text is not an expression: where (counted in characters from 1) and what was expected
/// there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at character {at}: {problem}")]
pub struct ExpressionError {
    /// The character the problem starts at, from 1.
    pub at: usize,
    /// What is wrong.
    pub problem: String,
}

impl TagExpression {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, ExpressionError> {
        let chars = text.chars().count();
        if chars > MAX_EXPRESSION_CHARS {
            return Err(ExpressionError {
                at: MAX_EXPRESSION_CHARS + 1,
                problem: format!("{chars} characters is too long; at most {MAX_EXPRESSION_CHARS}"),
            });
        }
        delimited(
            blank,
            expression,
            (blank, eof.context(expected("`and`, `or` or the end"))),
        )
        .parse(text)
        .map_err(|error| {
            let at = text[..error.offset()].chars().count() + 1;
            let mut wanted: Vec<String> = error
                .inner()
                .context()
                .filter_map(|context| match context {
                    StrContext::Expected(what) => Some(what.to_string()),
                    _ => None,
                })
                .collect();
            wanted.dedup();
            let found = match text[error.offset()..].chars().next() {
                None => "the end".to_owned(),
                Some(c) => format!("{c:?}"),
            };
            let problem = if wanted.is_empty() {
                format!("unexpected {found}")
            } else {
                format!("expected {}, found {found}", wanted.join(" or "))
            };
            ExpressionError { at, problem }
        })
    }

    /// The tags it reads, each once, in the order written.
    pub fn tags(&self) -> Vec<&str> {
        let mut tags = Vec::new();
        for (tag, _) in self.tests() {
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        tags
    }

    /// Each test of a tag it makes, in the order written: the tag, and how and with what it is
    /// compared (`None`: the tag alone, a bool that is true).
    pub fn tests(&self) -> Vec<(&str, Option<(Comparison, &Operand)>)> {
        let mut tests = Vec::new();
        self.collect_tests(&mut tests);
        tests
    }

    fn collect_tests<'e>(&'e self, tests: &mut Vec<(&'e str, Option<(Comparison, &'e Operand)>)>) {
        match self {
            Self::Is(tag) => tests.push((tag, None)),
            Self::Compare {
                tag,
                comparison,
                value,
            } => tests.push((tag, Some((*comparison, value)))),
            Self::Not(inner) => inner.collect_tests(tests),
            Self::And(left, right) | Self::Or(left, right) => {
                left.collect_tests(tests);
                right.collect_tests(tests);
            }
        }
    }

    /// The same expression with each tag renamed by `rename` (a type's member alarm on its
    /// instance's tags).
    pub fn renamed(&self, rename: &impl Fn(&str) -> String) -> Self {
        match self {
            Self::Is(tag) => Self::Is(rename(tag)),
            Self::Compare {
                tag,
                comparison,
                value,
            } => Self::Compare {
                tag: rename(tag),
                comparison: *comparison,
                value: value.clone(),
            },
            Self::Not(inner) => Self::Not(Box::new(inner.renamed(rename))),
            Self::And(left, right) => {
                Self::And(Box::new(left.renamed(rename)), Box::new(right.renamed(rename)))
            }
            Self::Or(left, right) => {
                Self::Or(Box::new(left.renamed(rename)), Box::new(right.renamed(rename)))
            }
        }
    }

    /// Whether it holds, given each tag's value by `value_of` (`None`: not known, e.g. of Bad
    /// quality): `Some(true)` or `Some(false)` when the known values decide it, `None` when
    /// they do not (Kleene's logic: `false and unknown` is false, `true or unknown` is true).
    /// A comparison of values of different kinds is not known either.
    pub fn evaluate(&self, value_of: &impl Fn(&str) -> Option<Operand>) -> Option<bool> {
        match self {
            Self::Is(tag) => match value_of(tag)? {
                Operand::Bool(value) => Some(value),
                Operand::Number(_) | Operand::Text(_) => None,
            },
            Self::Compare {
                tag,
                comparison,
                value,
            } => {
                let ordering = match (value_of(tag)?, value) {
                    (Operand::Number(left), Operand::Number(right)) => left.partial_cmp(right)?,
                    (Operand::Bool(left), Operand::Bool(right)) if !comparison.orders() => left.cmp(right),
                    (Operand::Text(left), Operand::Text(right)) if !comparison.orders() => {
                        left.as_str().cmp(right)
                    }
                    _ => return None,
                };
                Some(comparison.holds(ordering))
            }
            Self::Not(inner) => inner.evaluate(value_of).map(|holds| !holds),
            Self::And(left, right) => match (left.evaluate(value_of), right.evaluate(value_of)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Self::Or(left, right) => match (left.evaluate(value_of), right.evaluate(value_of)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
        }
    }

    /// How tightly it binds, printed: what decides where printing needs parentheses.
    fn binding(&self) -> u8 {
        match self {
            Self::Or(..) => 1,
            Self::And(..) => 2,
            Self::Not(_) => 3,
            Self::Is(_) | Self::Compare { .. } => 4,
        }
    }

    /// Writes it, in parentheses when it binds less tightly than `at_least`.
    fn write(&self, out: &mut fmt::Formatter<'_>, at_least: u8) -> fmt::Result {
        if self.binding() < at_least {
            out.write_str("(")?;
            self.write(out, 0)?;
            return out.write_str(")");
        }
        match self {
            Self::Is(tag) => write_tag(out, tag),
            Self::Compare {
                tag,
                comparison,
                value,
            } => {
                write_tag(out, tag)?;
                write!(out, " {} ", comparison.symbol())?;
                match value {
                    Operand::Number(number) => write!(out, "{number}"),
                    Operand::Bool(value) => write!(out, "{value}"),
                    Operand::Text(text) => {
                        out.write_str("\"")?;
                        for c in text.chars() {
                            if matches!(c, '"' | '\\') {
                                out.write_str("\\")?;
                            }
                            write!(out, "{c}")?;
                        }
                        out.write_str("\"")
                    }
                }
            }
            Self::Not(inner) => {
                out.write_str("not ")?;
                inner.write(out, 3)
            }
            // Both join left to right, so one on the right is in parentheses.
            Self::And(left, right) => {
                left.write(out, 2)?;
                out.write_str(" and ")?;
                right.write(out, 3)
            }
            Self::Or(left, right) => {
                left.write(out, 1)?;
                out.write_str(" or ")?;
                right.write(out, 2)
            }
        }
    }
}

/// A tag's name, in backticks unless it reads back bare.
fn write_tag(out: &mut fmt::Formatter<'_>, tag: &str) -> fmt::Result {
    let bare = tag.chars().next().is_some_and(starts_bare_name)
        && tag.chars().all(in_bare_name)
        && !KEYWORDS.contains(&tag);
    if bare {
        out.write_str(tag)
    } else {
        write!(out, "`{tag}`")
    }
}

impl fmt::Display for TagExpression {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(out, 0)
    }
}

impl std::str::FromStr for TagExpression {
    type Err = ExpressionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Serialize for TagExpression {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TagExpression {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn expected(what: &'static str) -> StrContext {
    StrContext::Expected(StrContextValue::Description(what))
}

fn blank(input: &mut &str) -> ModalResult<()> {
    take_while(0.., char::is_whitespace).void().parse_next(input)
}

/// A character a bare tag name may hold: anything but blanks and the language's own signs.
fn in_bare_name(c: char) -> bool {
    !c.is_whitespace() && !matches!(c, '(' | ')' | '=' | '!' | '<' | '>' | '"' | '`')
}

/// A character a bare tag name may start with: not one a number starts with.
fn starts_bare_name(c: char) -> bool {
    in_bare_name(c) && !c.is_ascii_digit() && !matches!(c, '-' | '+' | '.')
}

/// `word` as a whole word (not the start of a longer name), and the blanks after it.
fn keyword<'i>(word: &'static str) -> impl Parser<&'i str, &'i str, ErrMode<ContextError>> {
    terminated(
        word,
        (peek(alt((eof.void(), none_of(in_bare_name).void()))), blank),
    )
}

fn expression(input: &mut &str) -> ModalResult<TagExpression> {
    separated_foldl1(conjunction, keyword("or"), |left, _, right| {
        TagExpression::Or(Box::new(left), Box::new(right))
    })
    .parse_next(input)
}

fn conjunction(input: &mut &str) -> ModalResult<TagExpression> {
    separated_foldl1(negation, keyword("and"), |left, _, right| {
        TagExpression::And(Box::new(left), Box::new(right))
    })
    .parse_next(input)
}

fn negation(input: &mut &str) -> ModalResult<TagExpression> {
    alt((
        preceded(keyword("not"), cut_err(negation)).map(|inner| TagExpression::Not(Box::new(inner))),
        delimited(
            ('(', blank),
            cut_err(expression),
            cut_err((')', blank)).context(expected("`)`")),
        ),
        comparison,
    ))
    .parse_next(input)
}

fn comparison(input: &mut &str) -> ModalResult<TagExpression> {
    let tag = terminated(tag_name, blank).parse_next(input)?;
    let compared = opt((
        terminated(comparison_sign, blank),
        cut_err(terminated(value, blank)),
    ))
    .parse_next(input)?;
    Ok(match compared {
        None => TagExpression::Is(tag),
        Some((comparison, value)) => TagExpression::Compare {
            tag,
            comparison,
            value,
        },
    })
}

fn tag_name(input: &mut &str) -> ModalResult<String> {
    let quoted = delimited(
        '`',
        take_while(1.., |c| c != '`'),
        cut_err('`').context(expected("the closing '`'")),
    );
    let bare = (one_of(starts_bare_name), take_while(0.., in_bare_name))
        .take()
        .verify(|name: &str| !KEYWORDS.contains(&name));
    alt((quoted, bare, fail.context(expected("a tag's name"))))
        .map(str::to_owned)
        .parse_next(input)
}

fn comparison_sign(input: &mut &str) -> ModalResult<Comparison> {
    alt((
        "==".value(Comparison::Equal),
        "!=".value(Comparison::NotEqual),
        "<=".value(Comparison::LessOrEqual),
        ">=".value(Comparison::GreaterOrEqual),
        "<".value(Comparison::Less),
        ">".value(Comparison::Greater),
    ))
    .parse_next(input)
}

fn value(input: &mut &str) -> ModalResult<Operand> {
    alt((
        keyword("true").value(Operand::Bool(true)),
        keyword("false").value(Operand::Bool(false)),
        number.map(Operand::Number),
        text.map(Operand::Text),
        fail.context(expected("a number, true, false or a text in double quotes")),
    ))
    .parse_next(input)
}

fn number(input: &mut &str) -> ModalResult<f64> {
    let digits = || take_while(1.., |c: char| c.is_ascii_digit());
    (
        opt('-'),
        digits(),
        opt(('.', digits())),
        opt((one_of(['e', 'E']), opt(one_of(['+', '-'])), digits())),
    )
        .take()
        .try_map(str::parse::<f64>)
        .verify(|number: &f64| number.is_finite())
        .parse_next(input)
}

fn text(input: &mut &str) -> ModalResult<String> {
    let character = alt((preceded('\\', one_of(['"', '\\'])), none_of(['"', '\\'])));
    delimited(
        '"',
        winnow::combinator::repeat(0.., character).fold(String::new, |mut text, c| {
            text.push(c);
            text
        }),
        cut_err('"').context(expected("the closing '\"'")),
    )
    .parse_next(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parsed(text: &str) -> TagExpression {
        TagExpression::parse(text).unwrap_or_else(|error| panic!("{text:?}: {error}"))
    }

    #[test]
    fn the_documented_forms_read_and_print_back_canonically() {
        for (text, printed) in [
            ("Pump1.Running == false", "Pump1.Running == false"),
            ("not Pump1.Running", "not Pump1.Running"),
            ("Pump1.Running==false", "Pump1.Running == false"),
            (
                "Tank1.Level<10 and Mode != \"Auto\"",
                "Tank1.Level < 10 and Mode != \"Auto\"",
            ),
            ("(a or b) and c", "(a or b) and c"),
            ("a or (b and c)", "a or b and c"),
            ("a and (b and c)", "a and (b and c)"),
            ("not (a or b)", "not (a or b)"),
            ("`and` or `2nd.Pump` >= -1.5e3", "`and` or `2nd.Pump` >= -1500"),
            ("  Heater.Power >= 0.25  ", "Heater.Power >= 0.25"),
            ("nothing", "nothing"),
            (
                "Note == \"say \\\"hi\\\" \\\\ bye\"",
                "Note == \"say \\\"hi\\\" \\\\ bye\"",
            ),
        ] {
            assert_eq!(parsed(text).to_string(), printed, "{text:?}");
        }
        assert_eq!(
            parsed("Pump1.Running == false or Tank1.Level < 10 and Mode == \"Auto\"").tags(),
            ["Pump1.Running", "Tank1.Level", "Mode"]
        );
    }

    #[test]
    fn what_is_not_an_expression_is_named_with_its_place() {
        for (text, error) in [
            ("", "at character 1: expected a tag's name, found the end"),
            (
                "Pump1.Running ==",
                "at character 17: expected a number, true, false or a text in double quotes, found the end",
            ),
            (
                "Pump1.Running = false",
                "at character 15: expected `and`, `or` or the end, found '='",
            ),
            (
                "a && b",
                "at character 3: expected `and`, `or` or the end, found '&'",
            ),
            ("(a or b", "at character 8: expected `)`, found the end"),
            ("not", "at character 4: expected a tag's name, found the end"),
            (
                "Mode == \"Auto",
                "at character 14: expected the closing '\"', found the end",
            ),
            ("`Pump", "at character 6: expected the closing '`', found the end"),
            (
                "a == 1e999",
                "at character 6: expected a number, true, false or a text in double quotes, found '1'",
            ),
        ] {
            assert_eq!(
                TagExpression::parse(text).map_err(|error| error.to_string()),
                Err(error.to_owned()),
                "{text:?}"
            );
        }
        let long = vec!["a"; 501].join(" or ");
        assert_eq!(
            TagExpression::parse(&long).map_err(|error| error.to_string()),
            Err("at character 1001: 2501 characters is too long; at most 1000".to_owned())
        );
    }

    #[test]
    fn an_unknown_value_decides_nothing_unless_the_rest_does() {
        let expression = parsed("Pump1.Running == false and Tank1.Level < 10");
        let values = |running: Option<bool>, level: Option<f64>| {
            move |tag: &str| match tag {
                "Pump1.Running" => running.map(Operand::Bool),
                _ => level.map(Operand::Number),
            }
        };
        assert_eq!(expression.evaluate(&values(Some(false), Some(5.0))), Some(true));
        assert_eq!(expression.evaluate(&values(None, Some(5.0))), None);
        assert_eq!(expression.evaluate(&values(Some(true), None)), Some(false));
        let either = parsed("Pump1.Running == false or Tank1.Level < 10");
        assert_eq!(either.evaluate(&values(None, Some(5.0))), Some(true));
        assert_eq!(either.evaluate(&values(None, Some(50.0))), None);
        assert_eq!(parsed("not Pump1.Running").evaluate(&values(None, None)), None);
        assert_eq!(
            parsed("Tank1.Level == true").evaluate(&values(None, Some(1.0))),
            None,
            "a number is not compared with a bool"
        );
    }

    /// The tags of the generated expressions: (name, kind) with kinds 0 bool, 1 number, 2 text.
    const WORLD: [(&str, u8); 6] = [
        ("Pump1.Running", 0),
        ("and", 0),
        ("Tank1.Level", 1),
        ("2nd.Flow", 1),
        ("Mode", 2),
        ("Valve(3).Mode", 2),
    ];

    fn number() -> impl Strategy<Value = f64> {
        prop_oneof![Just(0.0), Just(10.0), Just(-2.5), -1e9..1e9f64]
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("Auto".to_owned()),
            Just(String::new()),
            "[a-zA-Z \"\\\\]{0,6}"
        ]
    }

    fn leaf() -> impl Strategy<Value = TagExpression> {
        let tag_of = |kind: u8| {
            proptest::sample::select(
                WORLD
                    .iter()
                    .filter(move |(_, of)| *of == kind)
                    .map(|(name, _)| (*name).to_owned())
                    .collect::<Vec<_>>(),
            )
        };
        let equality = proptest::sample::select(vec![Comparison::Equal, Comparison::NotEqual]);
        prop_oneof![
            tag_of(0).prop_map(TagExpression::Is),
            (tag_of(0), equality.clone(), any::<bool>()).prop_map(|(tag, comparison, value)| {
                TagExpression::Compare {
                    tag,
                    comparison,
                    value: Operand::Bool(value),
                }
            }),
            (
                tag_of(1),
                proptest::sample::select(Comparison::ALL.to_vec()),
                number()
            )
                .prop_map(|(tag, comparison, value)| TagExpression::Compare {
                    tag,
                    comparison,
                    value: Operand::Number(value),
                }),
            (tag_of(2), equality, text()).prop_map(|(tag, comparison, value)| TagExpression::Compare {
                tag,
                comparison,
                value: Operand::Text(value),
            }),
        ]
    }

    fn expression() -> impl Strategy<Value = TagExpression> {
        leaf().prop_recursive(5, 32, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| TagExpression::Not(Box::new(e))),
                (inner.clone(), inner.clone())
                    .prop_map(|(l, r)| TagExpression::And(Box::new(l), Box::new(r))),
                (inner.clone(), inner).prop_map(|(l, r)| TagExpression::Or(Box::new(l), Box::new(r))),
            ]
        })
    }

    /// The expression as a Rhai script over variables `t0`… (the tags, by their place in
    /// [`WORLD`]) and `c0`… (its values, pushed into `constants`): the reference it is evaluated
    /// against, by an interpreter that shares none of its code.
    fn as_rhai(expression: &TagExpression, constants: &mut Vec<rhai::Dynamic>) -> String {
        let tag = |name: &str| {
            let place = WORLD
                .iter()
                .position(|(of, _)| *of == name)
                .expect("a tag of the world");
            format!("t{place}")
        };
        match expression {
            TagExpression::Is(name) => tag(name),
            TagExpression::Compare {
                tag: name,
                comparison,
                value,
            } => {
                constants.push(match value {
                    Operand::Number(number) => rhai::Dynamic::from_float(*number),
                    Operand::Bool(value) => rhai::Dynamic::from_bool(*value),
                    Operand::Text(text) => rhai::Dynamic::from(text.clone()),
                });
                format!("({} {} c{})", tag(name), comparison.symbol(), constants.len() - 1)
            }
            TagExpression::Not(inner) => format!("!({})", as_rhai(inner, constants)),
            TagExpression::And(left, right) => {
                format!("({} && {})", as_rhai(left, constants), as_rhai(right, constants))
            }
            TagExpression::Or(left, right) => {
                format!("({} || {})", as_rhai(left, constants), as_rhai(right, constants))
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn printing_and_parsing_give_back_the_expression(expression in expression()) {
            let printed = expression.to_string();
            prop_assert_eq!(TagExpression::parse(&printed), Ok(expression), "{}", printed);
        }

        #[test]
        fn known_values_evaluate_as_rhai_evaluates_the_same_expression(
            expression in expression(),
            bools in proptest::array::uniform2(any::<bool>()),
            numbers in proptest::array::uniform2(number()),
            texts in proptest::array::uniform2(text()),
        ) {
            let value_of = |name: &str| -> Option<Operand> {
                let place = WORLD.iter().position(|(of, _)| *of == name)?;
                Some(match place {
                    0 | 1 => Operand::Bool(bools[place]),
                    2 | 3 => Operand::Number(numbers[place - 2]),
                    _ => Operand::Text(texts[place - 4].clone()),
                })
            };
            let mut constants = Vec::new();
            let script = as_rhai(&expression, &mut constants);
            let mut scope = rhai::Scope::new();
            for (place, (name, _)) in WORLD.iter().enumerate() {
                scope.push_dynamic(format!("t{place}"), match value_of(name) {
                    Some(Operand::Bool(value)) => rhai::Dynamic::from_bool(value),
                    Some(Operand::Number(number)) => rhai::Dynamic::from_float(number),
                    Some(Operand::Text(text)) => rhai::Dynamic::from(text),
                    None => rhai::Dynamic::UNIT,
                });
            }
            for (place, constant) in constants.into_iter().enumerate() {
                scope.push_dynamic(format!("c{place}"), constant);
            }
            let reference = rhai::Engine::new()
                .eval_with_scope::<bool>(&mut scope, &script)
                .map_err(|error| TestCaseError::fail(format!("{script}: {error}")))?;
            prop_assert_eq!(expression.evaluate(&value_of), Some(reference), "{}", script);
        }
    }
}
