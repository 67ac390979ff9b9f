//! A real Modbus TCP device for the tests: tokio-modbus's own server on a free loopback port,
//! answering function codes 1, 2, 3, 4, 5, 6, 15 and 16 from a register bank the test reads and
//! sets, with exceptions on the addresses the test names, counts of the requests it answered,
//! and ways to drop its connections or stop it and start it again on the same port.

use std::collections::HashMap;
use std::future::{Ready, ready};
use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_modbus::server::Service;
use tokio_modbus::server::tcp::Server;
use tokio_modbus::{ExceptionCode, FunctionCode, Request, Response, SlaveRequest};

/// Most registers one request may read (the protocol's limit, Modbus Application Protocol 6.3).
const MAX_READ_REGISTERS: u16 = 125;
/// Most registers one request may write (6.12).
const MAX_WRITE_REGISTERS: u16 = 123;
/// Most coils or discrete inputs one request may read (6.1).
const MAX_READ_BITS: u16 = 2000;
/// Most coils one request may write (6.11).
const MAX_WRITE_BITS: u16 = 1968;
/// Addresses in each table: 0..=65535.
const TABLE_LEN: usize = 1 << 16;

/// One of a device's four data tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// Read-write bits (function codes 1, 5, 15).
    Coils,
    /// Read-only bits (function code 2).
    DiscreteInputs,
    /// Read-only registers (function code 4).
    InputRegisters,
    /// Read-write registers (function codes 3, 6, 16).
    HoldingRegisters,
}

/// The device's memory and behaviour, shared by its connections and the test.
#[derive(Debug)]
struct Bank {
    coils: Vec<bool>,
    discrete_inputs: Vec<bool>,
    input_registers: Vec<u16>,
    holding_registers: Vec<u16>,
    /// Addresses answered with an exception instead of data.
    failures: HashMap<(Table, u16), ExceptionCode>,
    /// The unit id it answers to; `None` answers every unit id.
    unit_id: Option<u8>,
    /// Answers nothing at all (a device that hangs).
    mute: bool,
    /// Answers register reads one register short (a broken gateway).
    short: bool,
    /// Requests answered (with data or an exception), by function code.
    requests: HashMap<u8, u64>,
}

impl Bank {
    fn new(unit_id: Option<u8>) -> Self {
        Self {
            coils: vec![false; TABLE_LEN],
            discrete_inputs: vec![false; TABLE_LEN],
            input_registers: vec![0; TABLE_LEN],
            holding_registers: vec![0; TABLE_LEN],
            failures: HashMap::new(),
            unit_id,
            mute: false,
            short: false,
            requests: HashMap::new(),
        }
    }

    /// The indices of `count` addresses from `address`, once the request is within the
    /// protocol's quantity `limit`, inside the table and touches no failing address.
    fn span(
        &self,
        table: Table,
        address: u16,
        count: usize,
        limit: u16,
    ) -> Result<std::ops::Range<usize>, ExceptionCode> {
        if count == 0 || count > usize::from(limit) {
            return Err(ExceptionCode::IllegalDataValue);
        }
        let start = usize::from(address);
        let end = start + count;
        if end > TABLE_LEN {
            return Err(ExceptionCode::IllegalDataAddress);
        }
        for index in start..end {
            let key = (table, u16::try_from(index).unwrap_or(u16::MAX));
            if let Some(code) = self.failures.get(&key) {
                return Err(*code);
            }
        }
        Ok(start..end)
    }

    fn answer(&mut self, request: Request<'_>) -> Result<Response, ExceptionCode> {
        use Table::{Coils, DiscreteInputs, HoldingRegisters, InputRegisters};
        Ok(match request {
            Request::ReadCoils(address, count) => {
                let span = self.span(Coils, address, count.into(), MAX_READ_BITS)?;
                Response::ReadCoils(self.coils[span].to_vec())
            }
            Request::ReadDiscreteInputs(address, count) => {
                let span = self.span(DiscreteInputs, address, count.into(), MAX_READ_BITS)?;
                Response::ReadDiscreteInputs(self.discrete_inputs[span].to_vec())
            }
            Request::ReadHoldingRegisters(address, count) => {
                let mut span = self.span(HoldingRegisters, address, count.into(), MAX_READ_REGISTERS)?;
                span.end -= usize::from(self.short);
                Response::ReadHoldingRegisters(self.holding_registers[span].to_vec())
            }
            Request::ReadInputRegisters(address, count) => {
                let mut span = self.span(InputRegisters, address, count.into(), MAX_READ_REGISTERS)?;
                span.end -= usize::from(self.short);
                Response::ReadInputRegisters(self.input_registers[span].to_vec())
            }
            Request::WriteSingleCoil(address, value) => {
                let span = self.span(Coils, address, 1, 1)?;
                self.coils[span].fill(value);
                Response::WriteSingleCoil(address, value)
            }
            Request::WriteSingleRegister(address, value) => {
                let span = self.span(HoldingRegisters, address, 1, 1)?;
                self.holding_registers[span].fill(value);
                Response::WriteSingleRegister(address, value)
            }
            Request::WriteMultipleCoils(address, values) => {
                let span = self.span(Coils, address, values.len(), MAX_WRITE_BITS)?;
                self.coils[span].copy_from_slice(&values);
                Response::WriteMultipleCoils(address, quantity(values.len()))
            }
            Request::WriteMultipleRegisters(address, values) => {
                let span = self.span(HoldingRegisters, address, values.len(), MAX_WRITE_REGISTERS)?;
                self.holding_registers[span].copy_from_slice(&values);
                Response::WriteMultipleRegisters(address, quantity(values.len()))
            }
            _ => return Err(ExceptionCode::IllegalFunction),
        })
    }
}

/// A length already checked against a protocol limit, as the protocol's quantity.
fn quantity(len: usize) -> u16 {
    u16::try_from(len).unwrap_or(u16::MAX)
}

/// The device's request handler: one per connection, all on the same bank.
#[derive(Debug, Clone)]
struct Device(Arc<Mutex<Bank>>);

impl Service for Device {
    type Request = SlaveRequest<'static>;
    type Response = Option<Response>;
    type Exception = ExceptionCode;
    type Future = Ready<Result<Self::Response, Self::Exception>>;

    fn call(&self, request: Self::Request) -> Self::Future {
        let mut bank = lock(&self.0);
        if bank.mute {
            return ready(Ok(None));
        }
        *bank
            .requests
            .entry(request.request.function_code().value())
            .or_default() += 1;
        if bank.unit_id.is_some_and(|unit_id| unit_id != request.slave) {
            // What a gateway answers for a unit behind it that does not respond.
            return ready(Err(ExceptionCode::GatewayTargetDevice));
        }
        ready(bank.answer(request.request).map(Some))
    }
}

/// The bank, even if a test thread panicked holding it (its values are still what was set).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A Modbus TCP device of this test, on 127.0.0.1. Its bank outlives [`ModbusServer::stop`],
/// so a restarted device holds what it held before.
#[derive(Debug)]
pub struct ModbusServer {
    addr: SocketAddr,
    bank: Arc<Mutex<Bank>>,
    /// A second handle on each accepted socket, so the test can cut connections the server
    /// task owns.
    connections: Arc<Mutex<Vec<std::net::TcpStream>>>,
    task: Option<JoinHandle<()>>,
}

impl ModbusServer {
    /// Starts a device answering every unit id on a free loopback port.
    pub async fn start() -> Self {
        Self::start_with_unit(None).await
    }

    /// Starts a device on a free loopback port that answers unit id `unit_id` only (others
    /// get exception 0x0B, as from a gateway); `None` answers every unit id.
    pub async fn start_with_unit(unit_id: Option<u8>) -> Self {
        let mut server = Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            bank: Arc::new(Mutex::new(Bank::new(unit_id))),
            connections: Arc::default(),
            task: None,
        };
        server.listen().await;
        server
    }

    async fn listen(&mut self) {
        let listener = TcpListener::bind(self.addr)
            .await
            .unwrap_or_else(|error| panic!("the Modbus device binds {}: {error}", self.addr));
        self.addr = listener.local_addr().expect("a bound listener's address");
        let (bank, connections) = (self.bank.clone(), self.connections.clone());
        let on_connected = move |stream: TcpStream, _peer: SocketAddr| {
            let (bank, connections) = (bank.clone(), connections.clone());
            async move {
                stream.set_nodelay(true)?;
                let stream = stream.into_std()?;
                lock(&connections).push(stream.try_clone()?);
                let stream = TcpStream::from_std(stream)?;
                Ok::<_, std::io::Error>(Some((Device(bank), stream)))
            }
        };
        self.task = Some(tokio::spawn(async move {
            let server = Server::new(listener);
            // A connection's decode error closes only that connection, as a device would.
            let _ = server.serve(&on_connected, |_error| {}).await;
        }));
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Cuts every connection it has (the clients see them close); it keeps listening.
    pub fn drop_connections(&self) {
        for connection in lock(&self.connections).drain(..) {
            let _ = connection.shutdown(Shutdown::Both);
        }
    }

    /// Stops listening and cuts every connection; the bank keeps its values.
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        self.drop_connections();
    }

    /// Listens again on the same port, with the same bank.
    pub async fn restart(&mut self) {
        self.stop().await;
        self.listen().await;
    }

    /// Sets holding registers from `address` on.
    pub fn set_holding(&self, address: u16, values: &[u16]) {
        set(&mut lock(&self.bank).holding_registers, address, values);
    }

    /// `count` holding registers from `address` on.
    pub fn holding(&self, address: u16, count: usize) -> Vec<u16> {
        get(&lock(&self.bank).holding_registers, address, count)
    }

    /// Sets input registers from `address` on.
    pub fn set_input(&self, address: u16, values: &[u16]) {
        set(&mut lock(&self.bank).input_registers, address, values);
    }

    /// `count` input registers from `address` on.
    pub fn input(&self, address: u16, count: usize) -> Vec<u16> {
        get(&lock(&self.bank).input_registers, address, count)
    }

    /// Sets coils from `address` on.
    pub fn set_coil(&self, address: u16, values: &[bool]) {
        set(&mut lock(&self.bank).coils, address, values);
    }

    /// `count` coils from `address` on.
    pub fn coils(&self, address: u16, count: usize) -> Vec<bool> {
        get(&lock(&self.bank).coils, address, count)
    }

    /// Sets discrete inputs from `address` on.
    pub fn set_discrete(&self, address: u16, values: &[bool]) {
        set(&mut lock(&self.bank).discrete_inputs, address, values);
    }

    /// `count` discrete inputs from `address` on.
    pub fn discrete(&self, address: u16, count: usize) -> Vec<bool> {
        get(&lock(&self.bank).discrete_inputs, address, count)
    }

    /// Answers every request touching `address` of `table` with exception `code`.
    pub fn fail_at(&self, table: Table, address: u16, code: ExceptionCode) {
        lock(&self.bank).failures.insert((table, address), code);
    }

    /// Answers requests touching `address` of `table` with data again.
    pub fn heal(&self, table: Table, address: u16) {
        lock(&self.bank).failures.remove(&(table, address));
    }

    /// Answers nothing while `mute` (a device that hangs), keeping its connections.
    pub fn set_mute(&self, mute: bool) {
        lock(&self.bank).mute = mute;
    }

    /// Answers every register read one register short while `short` (a broken gateway).
    pub fn set_short(&self, short: bool) {
        lock(&self.bank).short = short;
    }

    /// How many requests with `function` it answered (with data or an exception).
    pub fn requests(&self, function: FunctionCode) -> u64 {
        lock(&self.bank)
            .requests
            .get(&function.value())
            .copied()
            .unwrap_or(0)
    }

    /// How many requests it answered, of every function.
    pub fn total_requests(&self) -> u64 {
        lock(&self.bank).requests.values().sum()
    }

    /// Starts counting requests from zero.
    pub fn reset_counts(&self) {
        lock(&self.bank).requests.clear();
    }
}

impl Drop for ModbusServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.drop_connections();
    }
}

/// Copies `values` into `table` from `address` on; values beyond address 65535 are a test's
/// mistake.
fn set<T: Copy>(table: &mut [T], address: u16, values: &[T]) {
    let start = usize::from(address);
    assert!(
        start + values.len() <= TABLE_LEN,
        "{} values from address {address} run past 65535",
        values.len()
    );
    table[start..start + values.len()].copy_from_slice(values);
}

/// `count` values of `table` from `address` on.
fn get<T: Copy>(table: &[T], address: u16, count: usize) -> Vec<T> {
    let start = usize::from(address);
    assert!(
        start + count <= TABLE_LEN,
        "{count} values from address {address} run past 65535"
    );
    table[start..start + count].to_vec()
}
