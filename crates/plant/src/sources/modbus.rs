//! One Modbus TCP source: a connection to one device (tokio-modbus), polled at the source's
//! rate by a read plan that merges neighbouring addresses into few requests, each value read
//! into its tag when it changed, and operators' writes sent to the device between polls.
//!
//! Quality: before the first answer, while the device is out of reach and after a request
//! goes unanswered within the source's timeout, every tag is Bad; a Modbus exception makes
//! the tags of that request Bad (the connection stays); a value that cannot be read (a NaN
//! float) makes its tag Bad. Each keeps its last value and that value's time.
//!
//! A request that timed out leaves the connection out of step (its late answer would be taken
//! for the next one's), so any failure but an exception drops the connection and connects
//! again after a growing pause.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use modbus::{Encoded, FieldValue, Point, Read, Table};
use plant_model::{Quality, SourceSpec, TagType, TagValue};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_modbus::client::{Client, Context, Writer};
use tokio_modbus::{ExceptionCode, Request, Response, Slave};
use tokio_util::sync::CancellationToken;

use super::reconnect::{Backoff, pause_refusing_writes};
use super::{
    Address, Binding, FieldWrite, FieldWriteError, RefusalLines, SourceBoard, SourceCounts, WriteFeed,
    lower_quality,
};
use crate::log_text::{LogBudget, MessageText};
use crate::plant::Plant;

/// Every Modbus source's lines about refused answers together, at most one a minute each kind.
static REFUSALS: RefusalLines = RefusalLines {
    budget: std::sync::LazyLock::new(|| std::sync::Mutex::new(LogBudget::new("refused Modbus answers"))),
    what: "Modbus answer",
};

/// A bound tag, its point, and what was last written to it.
#[derive(Debug)]
struct Bound {
    tag: String,
    kind: TagType,
    /// The value last read into the tag, and whether it was Good then.
    last: Option<(FieldValue, bool)>,
}

/// Why a poll or a write ended the connection.
#[derive(Debug)]
struct Lost(String);

/// The task of one Modbus source.
pub(crate) struct ModbusSource {
    spec: SourceSpec,
    /// The host and port of `modbus://host[:port]`.
    address: String,
    tags: Vec<Bound>,
    points: Vec<Point>,
    reads: Vec<Read>,
    plant: Plant,
    board: SourceBoard,
    index: usize,
    /// Its counts on the board, kept outside the board's lock.
    counts: Arc<SourceCounts>,
    writes: mpsc::Receiver<FieldWrite>,
    connected: Arc<AtomicBool>,
}

impl ModbusSource {
    /// The task of `spec` with the tags bound to it (`Address::Modbus` bindings).
    pub(crate) fn new(
        spec: SourceSpec,
        bindings: Vec<Binding>,
        plant: Plant,
        (board, index): (SourceBoard, usize),
        feed: WriteFeed,
    ) -> Result<Self, String> {
        let address = device_address(&spec.url)
            .ok_or_else(|| format!("{:?} is not a Modbus address: modbus://host[:port]", spec.url))?;
        let (tags, points): (Vec<Bound>, Vec<Point>) = bindings
            .into_iter()
            .filter_map(|binding| match binding.address {
                Address::Modbus(point) => Some((
                    Bound {
                        tag: binding.tag,
                        kind: binding.kind,
                        last: None,
                    },
                    point,
                )),
                _ => None,
            })
            .unzip();
        let reads = modbus::plan_reads(&points, spec.max_gap);
        Ok(Self {
            spec,
            address,
            tags,
            points,
            reads,
            plant,
            counts: board.counts_of(index),
            board,
            index,
            writes: feed.writes,
            connected: feed.connected,
        })
    }

    /// Connects, polls and writes until `shutdown`, connecting again after each loss.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        // Until the device answers, nothing of it is current.
        self.mark_bad(0..self.reads.len());
        let mut backoff = Backoff::new();
        // An outage is logged once, when it starts; the tries to come back are counted in the
        // status, and the return is logged when it comes.
        let mut outage_logged = false;
        loop {
            let started = Instant::now();
            let lost = tokio::select! {
                () = shutdown.cancelled() => break,
                lost = self.connected_session() => lost,
            };
            if self.connected.swap(false, Ordering::AcqRel) {
                outage_logged = false;
            }
            self.counts.set_connected(false);
            self.mark_bad(0..self.reads.len());
            self.note_error("connection", lost.0.clone());
            if outage_logged {
                tracing::debug!(source = %self.spec.name, error = %MessageText(&lost.0), "the Modbus device is still away");
            } else {
                outage_logged = true;
                tracing::warn!(source = %self.spec.name, error = %MessageText(&lost.0), "lost the Modbus device; its tags are Bad until it is back");
            }
            let pause = backoff.after(started.elapsed());
            let source = (self.spec.name.as_str(), "device");
            if !pause_refusing_writes(pause, &mut self.writes, source, &shutdown).await {
                return;
            }
        }
        self.connected.store(false, Ordering::Release);
    }

    /// One connection: connects, then polls at the source's rate and sends writes until a
    /// request fails other than by an exception.
    async fn connected_session(&mut self) -> Lost {
        let timeout = Duration::from_millis(self.spec.timeout);
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(&self.address)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Lost(format!("cannot connect to {}: {error}", self.address)),
            Err(_) => {
                return Lost(format!(
                    "{} did not accept a connection within {timeout:?}",
                    self.address
                ));
            }
        };
        // Requests are small and each waits for its answer.
        let _ = stream.set_nodelay(true);
        let mut context = tokio_modbus::client::tcp::attach_slave(stream, Slave(self.spec.unit));
        self.connected.store(true, Ordering::Release);
        self.counts.set_connected(true);
        tracing::info!(source = %self.spec.name, device = %self.address, "connected to the Modbus device");
        let mut poll = tokio::time::interval(Duration::from_millis(self.spec.poll_interval));
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let outcome = tokio::select! {
                _ = poll.tick() => self.poll(&mut context).await,
                Some(write) = self.writes.recv() => {
                    let outcome = self.write(&mut context, write).await;
                    // The field reports the written value back at once, not a period later.
                    if outcome.is_ok() {
                        poll.reset_immediately();
                    }
                    outcome
                }
            };
            if let Err(lost) = outcome {
                return lost;
            }
        }
    }

    /// Sends every read of the plan and reads the answers into the tags.
    async fn poll(&mut self, context: &mut Context) -> Result<(), Lost> {
        let started = Instant::now();
        let timeout = Duration::from_millis(self.spec.timeout);
        for position in 0..self.reads.len() {
            let read = &self.reads[position];
            let (table, start, count) = (read.table, read.start, read.count);
            // `call` rather than the `Reader` methods: those assert (in debug builds) that
            // the device answered as many values as asked, and a broken device may not.
            let request = match table {
                Table::Coils => Request::ReadCoils(start, count),
                Table::DiscreteInputs => Request::ReadDiscreteInputs(start, count),
                Table::InputRegisters => Request::ReadInputRegisters(start, count),
                Table::HoldingRegisters => Request::ReadHoldingRegisters(start, count),
            };
            let answer = tokio::time::timeout(timeout, context.call(request)).await;
            match answer {
                Err(_) => {
                    return Err(Lost(format!(
                        "no answer to reading {count} of {table} from {start} within {timeout:?}"
                    )));
                }
                Ok(Err(error)) => {
                    return Err(Lost(format!(
                        "reading {table} from {start}: {}",
                        transport_failure(&error)
                    )));
                }
                Ok(Ok(Err(exception))) => {
                    self.mark_bad(position..position + 1);
                    self.refuse(
                        "exception",
                        format!(
                            "the device answered reading {count} of {table} from {start} with {}",
                            exception_words(exception)
                        ),
                    );
                }
                Ok(Ok(Ok(Response::ReadCoils(bits) | Response::ReadDiscreteInputs(bits)))) => {
                    self.apply(position, &Answer::Bits(bits));
                }
                Ok(Ok(Ok(Response::ReadInputRegisters(words) | Response::ReadHoldingRegisters(words)))) => {
                    self.apply(position, &Answer::Registers(words));
                }
                // `call` refuses an answer of another function; this is in case it ever does not.
                Ok(Ok(Ok(other))) => {
                    return Err(Lost(format!(
                        "the device answered reading {table} from {start} with {other:?}"
                    )));
                }
            }
        }
        metrics::counter!(crate::telemetry::MODBUS_POLLS).increment(1);
        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.board.update(self.index, |status| {
            status.polls += 1;
            status.poll_micros = status.poll_micros.saturating_add(took);
        });
        Ok(())
    }

    /// Reads the answer of read `position` into its tags.
    fn apply(&mut self, position: usize, answer: &Answer) {
        let read = &self.reads[position];
        let values: Vec<(usize, Result<FieldValue, String>)> = match answer {
            Answer::Registers(words) => read
                .values(&self.points, words)
                .map(|(index, value)| (index, value.map_err(|error| error.to_string())))
                .collect(),
            Answer::Bits(bits) => read
                .bit_values(&self.points, bits)
                .map(|(index, value)| {
                    let value = value.ok_or_else(|| format!("the device answered {} bits", bits.len()));
                    (index, value)
                })
                .collect(),
        };
        let now = SystemTime::now();
        for (index, value) in values {
            match value {
                Ok(value) => self.update(index, value, now),
                Err(reason) => {
                    self.set_quality(index, Quality::BAD);
                    let tag = &self.tags[index].tag;
                    self.refuse("bad_value", format!("tag {tag:?}: {reason}"));
                }
            }
        }
    }

    /// A value read for tag `index`: written to the plant when it changed or the tag was not
    /// Good, so a steady value keeps the time it last changed.
    fn update(&mut self, index: usize, value: FieldValue, now: SystemTime) {
        let bound = &mut self.tags[index];
        if bound.last == Some((value, true)) {
            return;
        }
        bound.last = Some((value, true));
        let value = match (value, bound.kind) {
            (FieldValue::Bool(bit), _) => TagValue::Bool(bit),
            (FieldValue::Integer(whole), TagType::Integer) => TagValue::Integer(whole),
            (FieldValue::Integer(whole), _) => TagValue::Number(whole as f64),
            (FieldValue::Number(number), _) => TagValue::Number(number),
        };
        match self.plant.write_at(&bound.tag, value, Quality::GOOD, now) {
            Ok(_) => self.counts.add_messages(1),
            // A reload between the binding and now: the tag is gone or retyped.
            Err(error) => self.note_error("wrong_type", error.to_string()),
        }
    }

    /// Sends an operator's write and answers it.
    async fn write(&mut self, context: &mut Context, write: FieldWrite) -> Result<(), Lost> {
        let Some(index) = self.tags.iter().position(|bound| bound.tag == write.tag) else {
            let _ = write.done.send(Err(FieldWriteError::Refused(format!(
                "tag {:?} is not bound to source {:?}; nothing was written",
                write.tag, self.spec.name
            ))));
            return Ok(());
        };
        let point = self.points[index];
        let value = match write.value {
            TagValue::Bool(bit) => FieldValue::Bool(bit),
            TagValue::Integer(whole) => FieldValue::Integer(whole),
            TagValue::Number(number) => FieldValue::Number(number),
            TagValue::Text(_) => {
                let _ = write.done.send(Err(FieldWriteError::Refused(
                    "a Modbus point takes a number or true/false; nothing was written".to_owned(),
                )));
                return Ok(());
            }
        };
        let encoded = match point.encode(value) {
            Ok(encoded) => encoded,
            Err(error) => {
                let _ = write.done.send(Err(FieldWriteError::Refused(format!(
                    "{error}; nothing was written"
                ))));
                return Ok(());
            }
        };
        let timeout = Duration::from_millis(self.spec.timeout);
        let address = point.address();
        let sent = tokio::time::timeout(timeout, async {
            match &encoded {
                Encoded::Bit(bit) => context.write_single_coil(address, *bit).await,
                Encoded::Registers(words) if words.len() == 1 => {
                    context.write_single_register(address, words[0]).await
                }
                Encoded::Registers(words) => context.write_multiple_registers(address, words).await,
            }
        })
        .await;
        let place = format!("{} {address} of source {:?}", point.table(), self.spec.name);
        let (answer, lost) = match sent {
            Ok(Ok(Ok(()))) => {
                self.board.update(self.index, |status| status.writes += 1);
                (Ok(()), None)
            }
            Ok(Ok(Err(exception))) => (
                Err(FieldWriteError::Refused(format!(
                    "the device refused the write to {place} with {}; nothing was written",
                    exception_words(exception)
                ))),
                None,
            ),
            Ok(Err(error)) => (
                Err(FieldWriteError::NotConfirmed(format!(
                    "not confirmed: the connection to source {:?} failed while writing {place}; it may or may not have reached the field",
                    self.spec.name
                ))),
                Some(Lost(format!("writing {place}: {}", transport_failure(&error)))),
            ),
            Err(_) => (
                Err(FieldWriteError::NotConfirmed(format!(
                    "not confirmed: the device did not answer the write to {place} within {timeout:?}; it may or may not have reached the field"
                ))),
                Some(Lost(format!(
                    "no answer to the write to {place} within {timeout:?}"
                ))),
            ),
        };
        let _ = write.done.send(answer);
        lost.map_or(Ok(()), Err)
    }

    /// Marks the tags of the reads in `positions` Bad, keeping their values and times.
    fn mark_bad(&mut self, positions: std::ops::Range<usize>) {
        let indexes: Vec<usize> = self.reads[positions]
            .iter()
            .flat_map(|read| read.points.iter().copied())
            .collect();
        for index in indexes {
            self.set_quality(index, Quality::BAD);
        }
    }

    /// Lowers tag `index`'s quality to `quality` (never raises it), keeping value and time.
    fn set_quality(&mut self, index: usize, quality: Quality) {
        let bound = &mut self.tags[index];
        if let Some((_, good)) = &mut bound.last {
            *good = false;
        }
        lower_quality(&self.plant, &bound.tag, quality);
    }

    /// Counts a refused answer of kind `kind` and logs it at most once a minute.
    fn refuse(&self, kind: &str, message: String) {
        self.board
            .refuse(self.index, &self.spec.name, &REFUSALS, kind, message);
    }

    fn note_error(&self, kind: &str, message: String) {
        self.board.note_error(self.index, kind, message);
    }
}

/// What a read brought.
enum Answer {
    Bits(Vec<bool>),
    Registers(Vec<u16>),
}

/// An exception as the protocol names it, with its code.
fn exception_words(exception: ExceptionCode) -> String {
    format!("exception {} ({exception})", u8::from(exception))
}

/// `host:port` of `modbus://host[:port]` (port 502 unless given).
fn device_address(url: &str) -> Option<String> {
    let rest = url.strip_prefix("modbus://")?.trim_end_matches('/');
    if rest.is_empty() || rest.contains(['/', '@']) {
        return None;
    }
    let has_port = match rest.rsplit_once(':') {
        Some((host, port)) => port.parse::<u16>().is_ok() && (!host.contains(':') || host.ends_with(']')),
        None => false,
    };
    Some(if has_port {
        rest.to_owned()
    } else {
        format!("{rest}:502")
    })
}

/// What went wrong on the connection, in words. tokio-modbus reports a connection the device
/// closed (the end of its stream) as the thread's last OS error, whatever that was ("No such
/// file or directory"): an error of no network kind is that closing.
fn transport_failure(error: &tokio_modbus::Error) -> String {
    use std::io::ErrorKind;
    match error {
        tokio_modbus::Error::Transport(io)
            if !matches!(
                io.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::ConnectionRefused
                    | ErrorKind::BrokenPipe
                    | ErrorKind::NotConnected
                    | ErrorKind::TimedOut
                    | ErrorKind::UnexpectedEof
                    | ErrorKind::InvalidData
                    | ErrorKind::HostUnreachable
                    | ErrorKind::NetworkUnreachable
                    | ErrorKind::NetworkDown
            ) =>
        {
            "the device closed the connection".to_owned()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::device_address;

    #[test]
    fn device_addresses_take_the_default_port_and_bracketed_ipv6() {
        assert_eq!(device_address("modbus://plc"), Some("plc:502".to_owned()));
        assert_eq!(
            device_address("modbus://127.0.0.1:5020/"),
            Some("127.0.0.1:5020".to_owned())
        );
        assert_eq!(
            device_address("modbus://[::1]:1502"),
            Some("[::1]:1502".to_owned())
        );
        assert_eq!(device_address("modbus://[::1]"), Some("[::1]:502".to_owned()));
        assert_eq!(device_address("mqtt://plc"), None);
        assert_eq!(device_address("modbus://"), None);
    }
}
