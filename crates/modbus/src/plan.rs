//! Read plans: the points of one device grouped into as few read requests as the protocol's
//! limits allow, each request covering neighbouring addresses of one table.

use crate::point::{DecodeError, FieldValue, Point, Table};

/// One read request, and the points its answer carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The table read.
    pub table: Table,
    /// The first address read.
    pub start: u16,
    /// How many bits or registers it reads (at most the table's [`Table::max_read`]).
    pub count: u16,
    /// Indexes into the planned points of those this read carries.
    pub points: Vec<usize>,
}

impl Read {
    /// Each carried point's value out of a register table's answer (`registers`, from
    /// [`start`](Self::start) on), by its index among the planned points.
    pub fn values<'a>(
        &'a self,
        points: &'a [Point],
        registers: &'a [u16],
    ) -> impl Iterator<Item = (usize, Result<FieldValue, DecodeError>)> + 'a {
        self.points.iter().map(move |&index| {
            let point = &points[index];
            let from = usize::from(point.address() - self.start);
            (index, point.decode(registers.get(from..).unwrap_or_default()))
        })
    }

    /// Each carried point's value out of a bit table's answer (`bits`, from
    /// [`start`](Self::start) on); `None` where the answer was too short to hold it.
    pub fn bit_values<'a>(
        &'a self,
        points: &'a [Point],
        bits: &'a [bool],
    ) -> impl Iterator<Item = (usize, Option<FieldValue>)> + 'a {
        self.points.iter().map(move |&index| {
            let point = &points[index];
            let at = usize::from(point.address() - self.start);
            (index, bits.get(at).map(|bit| point.decode_bit(*bit)))
        })
    }
}

/// The reads that fetch every point: per table, points in address order are merged while the
/// addresses between them left unread are at most `max_gap` and the read stays within the
/// table's limit. Reading across a gap saves requests, but a device answers a read that
/// touches an address it lacks with an exception, hence the caller's choice.
pub fn plan_reads(points: &[Point], max_gap: u16) -> Vec<Read> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by_key(|&index| (points[index].table(), points[index].address()));
    let mut reads: Vec<Read> = Vec::new();
    for index in order {
        let point = &points[index];
        let (start, end) = (
            u32::from(point.address()),
            u32::from(point.address()) + u32::from(point.span()),
        );
        if let Some(read) = reads.last_mut()
            && read.table == point.table()
        {
            let read_end = u32::from(read.start) + u32::from(read.count);
            let merged_end = read_end.max(end);
            let within_gap = start <= read_end + u32::from(max_gap);
            let within_limit = merged_end - u32::from(read.start) <= u32::from(point.table().max_read());
            if within_gap && within_limit {
                // Within the limit, so it fits a u16.
                read.count = (merged_end - u32::from(read.start)) as u16;
                read.points.push(index);
                continue;
            }
        }
        reads.push(Read {
            table: point.table(),
            start: point.address(),
            count: (end - start) as u16,
            points: vec![index],
        });
    }
    reads
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::point::{Format, WordOrder};

    fn at(table: Table, address: u16, format: Format) -> Point {
        Point::new(table, address, format, WordOrder::HighWordFirst, (1.0, 0.0)).expect("a point")
    }

    #[test]
    fn neighbours_merge_gaps_and_tables_split() {
        let points = [
            at(Table::HoldingRegisters, 10, Format::F32),
            at(Table::HoldingRegisters, 12, Format::U16),
            at(Table::Coils, 0, Format::Bool),
            at(Table::HoldingRegisters, 20, Format::U16),
            at(Table::Coils, 1, Format::Bool),
        ];
        let contiguous = plan_reads(&points, 0);
        assert_eq!(
            contiguous,
            vec![
                Read {
                    table: Table::Coils,
                    start: 0,
                    count: 2,
                    points: vec![2, 4]
                },
                Read {
                    table: Table::HoldingRegisters,
                    start: 10,
                    count: 3,
                    points: vec![0, 1]
                },
                Read {
                    table: Table::HoldingRegisters,
                    start: 20,
                    count: 1,
                    points: vec![3]
                },
            ]
        );
        let bridged = plan_reads(&points, 8);
        assert_eq!(bridged.len(), 2);
        assert_eq!(
            bridged[1],
            Read {
                table: Table::HoldingRegisters,
                start: 10,
                count: 11,
                points: vec![0, 1, 3]
            }
        );
        let registers = [0x47F1, 0x2000, 7, 0, 0, 0, 0, 0, 0, 0, 42];
        let values: Vec<_> = bridged[1].values(&points, &registers).collect();
        assert_eq!(
            values,
            vec![
                (0, Ok(FieldValue::Number(123_456.0))),
                (1, Ok(FieldValue::Integer(7))),
                (3, Ok(FieldValue::Integer(42))),
            ]
        );
        let bits: Vec<_> = bridged[0].bit_values(&points, &[true]).collect();
        assert_eq!(bits, vec![(2, Some(FieldValue::Bool(true))), (4, None)]);
    }

    #[test]
    fn a_read_never_passes_the_protocols_limit() {
        let registers: Vec<Point> = (0..300)
            .map(|address| at(Table::InputRegisters, address, Format::U16))
            .collect();
        let reads = plan_reads(&registers, 0);
        assert_eq!(
            reads.iter().map(|read| read.count).collect::<Vec<_>>(),
            vec![125, 125, 50]
        );
        let bits: Vec<Point> = (0..4100)
            .map(|address| at(Table::DiscreteInputs, address, Format::Bool))
            .collect();
        let reads = plan_reads(&bits, 0);
        assert_eq!(
            reads.iter().map(|read| read.count).collect::<Vec<_>>(),
            vec![2000, 2000, 100]
        );
    }

    proptest! {
        /// Every point is read exactly once, whole, by a read of its table within the limit.
        #[test]
        fn every_point_is_read_once_within_the_limit(
            specs in prop::collection::vec((0u16..4, 0u16..600, 0usize..3), 0..200),
            max_gap in 0u16..20,
        ) {
            let points: Vec<Point> = specs.iter().map(|&(table, address, width)| {
                let table = [Table::Coils, Table::DiscreteInputs, Table::InputRegisters, Table::HoldingRegisters][usize::from(table)];
                let format = if table.holds_bits() { Format::Bool } else { [Format::U16, Format::F32, Format::F64][width] };
                at(table, address, format)
            }).collect();
            let reads = plan_reads(&points, max_gap);
            let mut seen = vec![0; points.len()];
            for read in &reads {
                prop_assert!(read.count <= read.table.max_read());
                for &index in &read.points {
                    seen[index] += 1;
                    let point = &points[index];
                    prop_assert_eq!(point.table(), read.table);
                    prop_assert!(point.address() >= read.start);
                    prop_assert!(u32::from(point.address()) + u32::from(point.span()) <= u32::from(read.start) + u32::from(read.count));
                }
            }
            prop_assert!(seen.iter().all(|&count| count == 1));
        }
    }
}
