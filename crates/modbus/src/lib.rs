//! Modbus as a polling client reads and writes it: the four tables ([`Table`]), the formats
//! a value takes in registers ([`Format`], [`WordOrder`]), a tag's place in a device
//! ([`Point`], with scale and offset to engineering units), and [`plan_reads`], which merges
//! neighbouring points into few requests within the protocol's limits.
//!
//! Nothing here does I/O: the caller sends the requests (tokio-modbus) and hands the answers
//! back to [`Read::values`] and the writes [`Point::encode`] makes.

mod plan;
mod point;

pub use plan::{Read, plan_reads};
pub use point::{
    DecodeError, EncodeError, Encoded, FieldValue, Format, Point, PointError, Refused, Table, WordOrder,
};

/// The number a 32-bit float stands for, as a 64-bit one: its shortest decimal, so a device's
/// `42.8f32` reads as 42.8, not as the 42.79999923706055 widening it gives. Non-finite floats
/// stay as they are.
pub fn f32_as_decimal(value: f32) -> f64 {
    if !value.is_finite() {
        return f64::from(value);
    }
    value.to_string().parse().unwrap_or(f64::from(value))
}
