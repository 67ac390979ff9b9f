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
