//! A tag's place in a Modbus device: which table, which address, in which format and word
//! order, and the scale and offset from the raw value to engineering units; decoding what the
//! device answered and encoding what an operator writes.

use std::fmt;

/// One of Modbus's four tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// Read-write bits (function codes 1, 5, 15).
    Coils,
    /// Read-only bits (function code 2).
    DiscreteInputs,
    /// Read-only 16-bit registers (function code 4).
    InputRegisters,
    /// Read-write 16-bit registers (function codes 3, 6, 16).
    HoldingRegisters,
}

impl Table {
    /// Whether its entries are bits rather than 16-bit registers.
    pub fn holds_bits(self) -> bool {
        matches!(self, Self::Coils | Self::DiscreteInputs)
    }

    /// Whether a client may write it.
    pub fn writable(self) -> bool {
        matches!(self, Self::Coils | Self::HoldingRegisters)
    }

    /// The most entries one read request may ask for (the protocol's limits: 2000 bits, 125
    /// registers).
    pub fn max_read(self) -> u16 {
        if self.holds_bits() { 2000 } else { 125 }
    }

    /// Its name as the plant file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Coils => "coil",
            Self::DiscreteInputs => "discrete_input",
            Self::InputRegisters => "input_register",
            Self::HoldingRegisters => "holding_register",
        }
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a value is laid out: one bit, or one, two or four 16-bit registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// A coil or discrete input.
    Bool,
    /// Unsigned, one register.
    U16,
    /// Two's complement, one register.
    I16,
    /// Unsigned, two registers.
    U32,
    /// Two's complement, two registers.
    I32,
    /// IEEE 754 single precision in two registers.
    F32,
    /// IEEE 754 double precision in four registers.
    F64,
}

impl Format {
    /// Every format, as the plant file spells them.
    pub const NAMES: [&'static str; 7] = ["bool", "u16", "i16", "u32", "i32", "f32", "f64"];

    /// The format the plant file spells `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "bool" => Self::Bool,
            "u16" => Self::U16,
            "i16" => Self::I16,
            "u32" => Self::U32,
            "i32" => Self::I32,
            "f32" => Self::F32,
            "f64" => Self::F64,
            _ => return None,
        })
    }

    /// Its name as the plant file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::U16 => "u16",
            Self::I16 => "i16",
            Self::U32 => "u32",
            Self::I32 => "i32",
            Self::F32 => "f32",
            Self::F64 => "f64",
        }
    }

    /// The entries of its table it takes: one bit, or its registers.
    pub fn span(self) -> u16 {
        match self {
            Self::Bool | Self::U16 | Self::I16 => 1,
            Self::U32 | Self::I32 | Self::F32 => 2,
            Self::F64 => 4,
        }
    }

    /// Whether the raw value is a whole number.
    fn is_integer(self) -> bool {
        matches!(self, Self::U16 | Self::I16 | Self::U32 | Self::I32)
    }

    /// The smallest and largest raw whole number it holds.
    fn integer_range(self) -> (f64, f64) {
        match self {
            Self::U16 => (0.0, f64::from(u16::MAX)),
            Self::I16 => (f64::from(i16::MIN), f64::from(i16::MAX)),
            Self::U32 => (0.0, f64::from(u32::MAX)),
            Self::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
            Self::Bool | Self::F32 | Self::F64 => (f64::NEG_INFINITY, f64::INFINITY),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The order of the 16-bit words of a value of two or four registers. Within a word the
/// bytes are always big-endian, as the protocol sends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WordOrder {
    /// The most significant word at the lowest address ("ABCD", Modbus's own order).
    #[default]
    HighWordFirst,
    /// The least significant word at the lowest address ("CDAB", "word swapped"; Ignition's
    /// "Reverse Word Order").
    LowWordFirst,
}

impl WordOrder {
    /// Both orders, as the plant file spells them.
    pub const NAMES: [&'static str; 2] = ["high_word_first", "low_word_first"];

    /// The order the plant file spells `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "high_word_first" => Some(Self::HighWordFirst),
            "low_word_first" => Some(Self::LowWordFirst),
            _ => None,
        }
    }

    /// Its name as the plant file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::HighWordFirst => "high_word_first",
            Self::LowWordFirst => "low_word_first",
        }
    }
}

/// A value read from a device, in engineering units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldValue {
    /// A coil or discrete input.
    Bool(bool),
    /// A whole-number register value without scale or offset.
    Integer(i64),
    /// A floating-point register value, or any value with a scale or offset.
    Number(f64),
}

/// What to send for a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoded {
    /// One coil.
    Bit(bool),
    /// The registers from the point's address on.
    Registers(Vec<u16>),
}

/// Why a point cannot be.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PointError {
    /// A coil or discrete input with a register format.
    #[error("a {0} holds single bits: its format is bool")]
    BitsAreBool(Table),
    /// A register with format bool.
    #[error("a {0} holds registers: bool is for coils and discrete inputs")]
    RegistersAreNotBool(Table),
    /// A value whose last register would be past address 65535.
    #[error("a {0} at {1} runs past the last address, 65535")]
    PastTheEnd(Format, u16),
    /// A scale of 0 or not finite.
    #[error("scale must be a finite number other than 0, not {0}")]
    Scale(f64),
    /// An offset not finite.
    #[error("offset must be a finite number, not {0}")]
    Offset(f64),
}

/// Why an answer could not be read as the point's value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer registers than the format takes (the format, what it takes, what came).
    #[error("the device answered {2} registers where a {0} takes {1}")]
    Short(Format, u16, usize),
    /// A floating-point value that is NaN or infinite (the format, the raw value).
    #[error("the device's {0} is not a finite number ({1})")]
    NotFinite(Format, f64),
    /// A value whose scale and offset take it past what a number holds (the raw value, the
    /// scale, the offset).
    #[error("the device's value {0} times the scale {1} plus the offset {2} is not a finite number")]
    ScaledNotFinite(f64, f64, f64),
}

/// A value that cannot be written as given, in engineering units, with what it comes to in
/// the device's units.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// The value given.
    pub value: f64,
    /// It in the device's units: (value - offset) / scale.
    pub raw: f64,
    /// The point's format.
    pub format: Format,
}

/// Why a value cannot be written to the point.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    /// Input registers and discrete inputs.
    #[error("a {0} is read-only")]
    ReadOnly(Table),
    /// A number for a bit or a bit for a register (the format, what it takes, what was given).
    #[error("a {0} point takes {1}, not {2}")]
    WrongKind(Format, &'static str, &'static str),
    /// NaN or infinite.
    #[error("{0} is not a finite number")]
    NotFinite(f64),
    /// Beyond what the format holds (its smallest and largest values).
    #[error("{} is {} in the device's units, outside what a {} holds ({} to {})", .0.value, .0.raw, .0.format, .1, .2)]
    OutOfRange(Refused, f64, f64),
    /// Not a whole number in the device's units, for an integer format.
    #[error("{} is {} in the device's units: a {} holds whole numbers only", .0.value, .0.raw, .0.format)]
    NotWhole(Refused),
}

/// A tag's place in a device: engineering value = raw value x `scale` + `offset`. Equal
/// (and hashed) by its fields, scale and offset bit for bit.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    table: Table,
    address: u16,
    format: Format,
    word_order: WordOrder,
    scale: f64,
    offset: f64,
}

impl Point {
    fn identity(&self) -> (Table, u16, Format, WordOrder, u64, u64) {
        (
            self.table,
            self.address,
            self.format,
            self.word_order,
            self.scale.to_bits(),
            self.offset.to_bits(),
        )
    }
}

impl PartialEq for Point {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for Point {}

impl std::hash::Hash for Point {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

/// How close a scaled write must come to a whole raw number to be taken as it (floating-point
/// scales such as 0.1 are not exact).
const WHOLE_TOLERANCE: f64 = 1e-6;

impl Point {
    /// A point, checked: bits are bool and registers are not, the value fits below address
    /// 65536, and scale and offset are usable.
    pub fn new(
        table: Table,
        address: u16,
        format: Format,
        word_order: WordOrder,
        (scale, offset): (f64, f64),
    ) -> Result<Self, PointError> {
        match (table.holds_bits(), format) {
            (true, Format::Bool)
            | (false, Format::U16 | Format::I16 | Format::U32 | Format::I32 | Format::F32 | Format::F64) => {}
            (true, _) => return Err(PointError::BitsAreBool(table)),
            (false, Format::Bool) => return Err(PointError::RegistersAreNotBool(table)),
        }
        if u32::from(address) + u32::from(format.span()) > 0x1_0000 {
            return Err(PointError::PastTheEnd(format, address));
        }
        if !scale.is_finite() || scale == 0.0 {
            return Err(PointError::Scale(scale));
        }
        if !offset.is_finite() {
            return Err(PointError::Offset(offset));
        }
        Ok(Self {
            table,
            address,
            format,
            word_order,
            scale,
            offset,
        })
    }

    /// Its table.
    pub fn table(&self) -> Table {
        self.table
    }

    /// Its first address (0-based, as sent on the wire).
    pub fn address(&self) -> u16 {
        self.address
    }

    /// Its format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The order of its words.
    pub fn word_order(&self) -> WordOrder {
        self.word_order
    }

    /// The entries of its table it takes.
    pub fn span(&self) -> u16 {
        self.format.span()
    }

    fn scaled(&self) -> bool {
        self.scale != 1.0 || self.offset != 0.0
    }

    /// The value of the bit read for it.
    pub fn decode_bit(&self, bit: bool) -> FieldValue {
        FieldValue::Bool(bit)
    }

    /// The value of the registers read for it (its span, from its address on).
    pub fn decode(&self, registers: &[u16]) -> Result<FieldValue, DecodeError> {
        let span = self.format.span();
        let Some(words) = registers.get(..usize::from(span)) else {
            return Err(DecodeError::Short(self.format, span, registers.len()));
        };
        let mut ordered = [0u16; 4];
        ordered[..words.len()].copy_from_slice(words);
        if self.word_order == WordOrder::LowWordFirst {
            ordered[..words.len()].reverse();
        }
        let bits = ordered[..words.len()]
            .iter()
            .fold(0u64, |bits, word| bits << 16 | u64::from(*word));
        let raw = match self.format {
            Format::Bool => return Ok(FieldValue::Bool(bits != 0)),
            Format::U16 | Format::U32 => Raw::Whole(bits as i64),
            Format::I16 => Raw::Whole(i64::from(bits as u16 as i16)),
            Format::I32 => Raw::Whole(i64::from(bits as u32 as i32)),
            Format::F32 => Raw::Float(crate::f32_as_decimal(f32::from_bits(bits as u32))),
            Format::F64 => Raw::Float(f64::from_bits(bits)),
        };
        let raw = match raw {
            Raw::Whole(whole) if !self.scaled() => return Ok(FieldValue::Integer(whole)),
            Raw::Whole(whole) => whole as f64,
            Raw::Float(raw) if !raw.is_finite() => return Err(DecodeError::NotFinite(self.format, raw)),
            Raw::Float(raw) if !self.scaled() => return Ok(FieldValue::Number(raw)),
            Raw::Float(raw) => raw,
        };
        // A large raw value times a large scale passes what a number holds: the tag goes Bad
        // with the reason, never an infinite value in the plant.
        let scaled = raw * self.scale + self.offset;
        if scaled.is_finite() {
            Ok(FieldValue::Number(decimal(scaled)))
        } else {
            Err(DecodeError::ScaledNotFinite(raw, self.scale, self.offset))
        }
    }

    /// What to send to write `value` (engineering units) to it.
    pub fn encode(&self, value: FieldValue) -> Result<Encoded, EncodeError> {
        if !self.table.writable() {
            return Err(EncodeError::ReadOnly(self.table));
        }
        let number = match (self.format, value) {
            (Format::Bool, FieldValue::Bool(bit)) => return Ok(Encoded::Bit(bit)),
            (Format::Bool, other) => {
                return Err(EncodeError::WrongKind(
                    self.format,
                    "true or false",
                    kind_of(other),
                ));
            }
            (_, FieldValue::Bool(_)) => {
                return Err(EncodeError::WrongKind(self.format, "a number", "true or false"));
            }
            (_, FieldValue::Integer(whole)) => whole as f64,
            (_, FieldValue::Number(number)) => number,
        };
        if !number.is_finite() {
            return Err(EncodeError::NotFinite(number));
        }
        let raw = if self.scaled() {
            (number - self.offset) / self.scale
        } else {
            number
        };
        let bits = match self.format {
            Format::F32 => {
                let single = raw as f32;
                if !single.is_finite() {
                    return Err(self.out_of_range(number, raw, f64::from(f32::MIN), f64::from(f32::MAX)));
                }
                u64::from(single.to_bits())
            }
            Format::F64 if !raw.is_finite() => {
                return Err(self.out_of_range(number, raw, f64::MIN, f64::MAX));
            }
            Format::F64 => raw.to_bits(),
            _ => self.whole_bits(number, raw)?,
        };
        let span = usize::from(self.format.span());
        let mut words: Vec<u16> = (0..span)
            .map(|index| (bits >> (16 * (span - 1 - index))) as u16)
            .collect();
        if self.word_order == WordOrder::LowWordFirst {
            words.reverse();
        }
        Ok(Encoded::Registers(words))
    }

    /// The raw whole number `raw` of an integer format as bits, if it is one and fits.
    fn whole_bits(&self, value: f64, raw: f64) -> Result<u64, EncodeError> {
        debug_assert!(self.format.is_integer());
        let whole = raw.round();
        if (raw - whole).abs() > WHOLE_TOLERANCE * raw.abs().max(1.0) {
            return Err(EncodeError::NotWhole(self.refused(value, raw)));
        }
        let (min, max) = self.format.integer_range();
        if whole < min || whole > max {
            return Err(self.out_of_range(value, raw, min, max));
        }
        let whole = whole as i64;
        Ok(match self.format {
            Format::I16 => u64::from(whole as i16 as u16),
            Format::I32 => u64::from(whole as i32 as u32),
            _ => whole as u64,
        })
    }

    fn out_of_range(&self, value: f64, raw: f64, min: f64, max: f64) -> EncodeError {
        EncodeError::OutOfRange(self.refused(value, raw), min, max)
    }

    fn refused(&self, value: f64, raw: f64) -> Refused {
        Refused {
            value,
            raw,
            format: self.format,
        }
    }
}

/// `value` rounded to 15 significant digits, what a double holds exactly in decimal: a
/// decimal scale is not exact in binary, so 428 x 0.1 comes to 42.800000000000004, which an
/// operator reads as noise; rounded, it is the 42.8 the device meant.
fn decimal(value: f64) -> f64 {
    format!("{value:.14e}").parse().unwrap_or(value)
}

/// A raw register value before scale and offset.
enum Raw {
    Whole(i64),
    Float(f64),
}

fn kind_of(value: FieldValue) -> &'static str {
    match value {
        FieldValue::Bool(_) => "true or false",
        FieldValue::Integer(_) | FieldValue::Number(_) => "a number",
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn point(format: Format, order: WordOrder) -> Point {
        Point::new(Table::HoldingRegisters, 100, format, order, (1.0, 0.0)).expect("a point")
    }

    #[test]
    fn known_layouts_decode_in_both_word_orders() {
        // 123456.0 as f32 is 0x47F1_2000; as u32 0x0001_E240.
        let high = point(Format::F32, WordOrder::HighWordFirst);
        let low = point(Format::F32, WordOrder::LowWordFirst);
        assert_eq!(high.decode(&[0x47F1, 0x2000]), Ok(FieldValue::Number(123_456.0)));
        assert_eq!(low.decode(&[0x2000, 0x47F1]), Ok(FieldValue::Number(123_456.0)));
        assert_eq!(
            point(Format::U32, WordOrder::HighWordFirst).decode(&[0x0001, 0xE240]),
            Ok(FieldValue::Integer(123_456))
        );
        assert_eq!(
            point(Format::I32, WordOrder::LowWordFirst).decode(&[0xFFFE, 0xFFFF]),
            Ok(FieldValue::Integer(-2))
        );
        assert_eq!(
            point(Format::I16, WordOrder::HighWordFirst).decode(&[0xFF9C]),
            Ok(FieldValue::Integer(-100))
        );
        // 1.5 as f64 is 0x3FF8_0000_0000_0000.
        assert_eq!(
            point(Format::F64, WordOrder::HighWordFirst).decode(&[0x3FF8, 0, 0, 0]),
            Ok(FieldValue::Number(1.5))
        );
        assert_eq!(
            point(Format::F64, WordOrder::LowWordFirst).decode(&[0, 0, 0, 0x3FF8]),
            Ok(FieldValue::Number(1.5))
        );
    }

    #[test]
    fn a_float_register_reads_as_the_decimal_it_holds() {
        // 42.8 as f32 is 0x422B_3333, which widens to 42.79999923706055.
        let bits = 42.8f32.to_bits();
        assert_eq!(bits, 0x422B_3333);
        let words = [(bits >> 16) as u16, bits as u16];
        assert_eq!(
            point(Format::F32, WordOrder::HighWordFirst).decode(&words),
            Ok(FieldValue::Number(42.8))
        );
        assert_eq!(crate::f32_as_decimal(625.5), 625.5);
        assert!(crate::f32_as_decimal(f32::NAN).is_nan());
    }

    #[test]
    fn a_decimal_scale_gives_the_decimal_value() {
        let tenths = Point::new(
            Table::HoldingRegisters,
            0,
            Format::U16,
            WordOrder::HighWordFirst,
            (0.1, 0.0),
        )
        .expect("a point");
        assert_eq!(tenths.decode(&[428]), Ok(FieldValue::Number(42.8)));
        let hundredths = Point::new(
            Table::HoldingRegisters,
            0,
            Format::U16,
            WordOrder::HighWordFirst,
            (0.01, 600.0),
        )
        .expect("a point");
        assert_eq!(hundredths.decode(&[2550]), Ok(FieldValue::Number(625.5)));
        // And back to the raw value the device holds.
        assert_eq!(
            tenths.encode(FieldValue::Number(42.8)),
            Ok(Encoded::Registers(vec![428]))
        );
    }

    #[test]
    fn a_scale_that_overflows_is_an_error_both_ways_never_infinity() {
        let huge = Point::new(
            Table::HoldingRegisters,
            0,
            Format::F64,
            WordOrder::HighWordFirst,
            (1e300, 0.0),
        )
        .expect("a point");
        let raw = 1e300_f64.to_bits();
        let words: Vec<u16> = (0..4).map(|index| (raw >> (48 - 16 * index)) as u16).collect();
        assert_eq!(
            huge.decode(&words),
            Err(DecodeError::ScaledNotFinite(1e300, 1e300, 0.0))
        );
        let tiny = Point::new(
            Table::HoldingRegisters,
            0,
            Format::F64,
            WordOrder::HighWordFirst,
            (1e-300, 0.0),
        )
        .expect("a point");
        assert!(matches!(
            tiny.encode(FieldValue::Number(1e100)),
            Err(EncodeError::OutOfRange(..))
        ));
        let wide = Point::new(
            Table::HoldingRegisters,
            0,
            Format::U32,
            WordOrder::HighWordFirst,
            (f64::MAX, 0.0),
        )
        .expect("a point");
        assert!(matches!(
            wide.decode(&[0xFFFF, 0xFFFF]),
            Err(DecodeError::ScaledNotFinite(..))
        ));
    }

    #[test]
    fn scale_and_offset_give_engineering_units_both_ways() {
        let tenths = Point::new(
            Table::HoldingRegisters,
            0,
            Format::I16,
            WordOrder::HighWordFirst,
            (0.1, -40.0),
        )
        .expect("a point");
        let FieldValue::Number(value) = tenths.decode(&[615]).expect("decodes") else {
            panic!("a scaled integer reads as a number")
        };
        assert!((value - 21.5).abs() < 1e-9, "{value}");
        assert_eq!(
            tenths.encode(FieldValue::Number(21.5)),
            Ok(Encoded::Registers(vec![615]))
        );
        let error = tenths
            .encode(FieldValue::Number(21.55))
            .expect_err("not a step of 0.1");
        assert!(error.to_string().contains("whole numbers"), "{error}");
        let error = tenths.encode(FieldValue::Number(4000.0)).expect_err("past i16");
        assert!(error.to_string().contains("outside what a i16 holds"), "{error}");
    }

    #[test]
    fn bad_points_answers_and_writes_are_refused_in_words() {
        assert_eq!(
            Point::new(Table::Coils, 0, Format::U16, WordOrder::HighWordFirst, (1.0, 0.0)),
            Err(PointError::BitsAreBool(Table::Coils))
        );
        let last = Point::new(
            Table::InputRegisters,
            65534,
            Format::F32,
            WordOrder::HighWordFirst,
            (1.0, 0.0),
        );
        assert!(last.is_ok(), "the last two registers hold an f32: {last:?}");
        assert_eq!(
            Point::new(
                Table::InputRegisters,
                65535,
                Format::F32,
                WordOrder::HighWordFirst,
                (1.0, 0.0)
            ),
            Err(PointError::PastTheEnd(Format::F32, 65535))
        );
        assert_eq!(
            Point::new(
                Table::InputRegisters,
                0,
                Format::U16,
                WordOrder::HighWordFirst,
                (0.0, 0.0)
            ),
            Err(PointError::Scale(0.0))
        );
        let float = point(Format::F32, WordOrder::HighWordFirst);
        assert!(matches!(
            float.decode(&[0x7FC0, 0]),
            Err(DecodeError::NotFinite(..))
        ));
        assert!(matches!(
            float.decode(&[0x7FC0]),
            Err(DecodeError::Short(_, 2, 1))
        ));
        let input = Point::new(
            Table::InputRegisters,
            0,
            Format::U16,
            WordOrder::HighWordFirst,
            (1.0, 0.0),
        )
        .expect("a point");
        assert_eq!(
            input.encode(FieldValue::Integer(1)),
            Err(EncodeError::ReadOnly(Table::InputRegisters))
        );
        assert!(matches!(
            float.encode(FieldValue::Bool(true)),
            Err(EncodeError::WrongKind(..))
        ));
        assert!(matches!(
            float.encode(FieldValue::Number(f64::NAN)),
            Err(EncodeError::NotFinite(..))
        ));
        assert!(matches!(
            float.encode(FieldValue::Number(1e300)),
            Err(EncodeError::OutOfRange(..))
        ));
    }

    fn formats() -> impl Strategy<Value = (Format, WordOrder)> {
        (
            prop::sample::select(vec![
                Format::U16,
                Format::I16,
                Format::U32,
                Format::I32,
                Format::F32,
                Format::F64,
            ]),
            prop::sample::select(vec![WordOrder::HighWordFirst, WordOrder::LowWordFirst]),
        )
    }

    proptest! {
        /// Any registers a device answers decode without a panic, and what decodes as a value
        /// encodes back to the same registers.
        #[test]
        fn registers_decode_and_encode_back((format, order) in formats(), words in prop::collection::vec(any::<u16>(), 4)) {
            let point = point(format, order);
            let span = usize::from(format.span());
            if let Ok(value) = point.decode(&words) {
                prop_assert_eq!(point.encode(value), Ok(Encoded::Registers(words[..span].to_vec())));
            }
        }
    }
}
