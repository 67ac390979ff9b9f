//! The Modbus TCP test device, as tokio-modbus's client sees it: it reads what the bank holds,
//! takes writes, answers exceptions where told, drops connections, and comes back on the same
//! port after a restart.

use std::net::SocketAddr;
use std::time::Duration;

use tokio_modbus::client::{Context, Reader, Writer};
use tokio_modbus::{ExceptionCode, FunctionCode, Slave};
use tserver_tests::modbus::{ModbusServer, Table};

/// How long any one exchange with the device may take before the test fails.
const EXCHANGE: Duration = Duration::from_secs(10);

/// A client connection to `addr` as unit `unit`.
async fn connect(addr: SocketAddr, unit: u8) -> std::io::Result<Context> {
    tokio::time::timeout(
        EXCHANGE,
        tokio_modbus::client::tcp::connect_slave(addr, Slave(unit)),
    )
    .await
    .expect("the connection attempt ends within 10 s")
}

/// Runs one exchange, failing the test if it does not end within [`EXCHANGE`].
async fn within<T>(exchange: impl Future<Output = T>) -> T {
    tokio::time::timeout(EXCHANGE, exchange)
        .await
        .expect("the device answers within 10 s")
}

#[tokio::test]
async fn reads_what_the_bank_holds() {
    let device = ModbusServer::start().await;
    device.set_holding(100, &[1, 2, 3]);
    device.set_input(65534, &[0xBEEF, 0xCAFE]);
    device.set_coil(7, &[true, false, true]);
    device.set_discrete(0, &[false, true]);
    let mut client = connect(device.addr(), 1).await.expect("connects");

    let holding = within(client.read_holding_registers(100, 3)).await;
    assert_eq!(holding.expect("transport").expect("data"), [1, 2, 3]);
    let input = within(client.read_input_registers(65534, 2)).await;
    assert_eq!(input.expect("transport").expect("data"), [0xBEEF, 0xCAFE]);
    let coils = within(client.read_coils(7, 3)).await;
    assert_eq!(coils.expect("transport").expect("data"), [true, false, true]);
    let discrete = within(client.read_discrete_inputs(0, 2)).await;
    assert_eq!(discrete.expect("transport").expect("data"), [false, true]);

    for function in [
        FunctionCode::ReadHoldingRegisters,
        FunctionCode::ReadInputRegisters,
        FunctionCode::ReadCoils,
        FunctionCode::ReadDiscreteInputs,
    ] {
        assert_eq!(device.requests(function), 1, "one request of {function}");
    }
    assert_eq!(device.total_requests(), 4);
    device.reset_counts();
    assert_eq!(device.total_requests(), 0);
}

#[tokio::test]
async fn writes_land_in_the_bank_and_read_back() {
    let device = ModbusServer::start().await;
    let mut client = connect(device.addr(), 1).await.expect("connects");

    within(client.write_single_register(10, 0x1234))
        .await
        .expect("transport")
        .expect("written");
    within(client.write_multiple_registers(11, &[5, 6, 7]))
        .await
        .expect("transport")
        .expect("written");
    within(client.write_single_coil(3, true))
        .await
        .expect("transport")
        .expect("written");
    within(client.write_multiple_coils(4, &[true, false, true]))
        .await
        .expect("transport")
        .expect("written");

    assert_eq!(device.holding(10, 4), [0x1234, 5, 6, 7]);
    assert_eq!(device.coils(3, 4), [true, true, false, true]);
    let read = within(client.read_holding_registers(10, 4)).await;
    assert_eq!(read.expect("transport").expect("data"), [0x1234, 5, 6, 7]);
    let read = within(client.read_coils(3, 4)).await;
    assert_eq!(read.expect("transport").expect("data"), [true, true, false, true]);
    for function in [
        FunctionCode::WriteSingleRegister,
        FunctionCode::WriteMultipleRegisters,
        FunctionCode::WriteSingleCoil,
        FunctionCode::WriteMultipleCoils,
    ] {
        assert_eq!(device.requests(function), 1, "one request of {function}");
    }
}

#[tokio::test]
async fn answers_exceptions_and_keeps_the_connection() {
    let device = ModbusServer::start().await;
    device.set_holding(0, &[42; 10]);
    device.fail_at(Table::HoldingRegisters, 5, ExceptionCode::IllegalDataAddress);
    let mut client = connect(device.addr(), 1).await.expect("connects");

    let touching = within(client.read_holding_registers(3, 4)).await;
    assert_eq!(
        touching.expect("transport"),
        Err(ExceptionCode::IllegalDataAddress)
    );
    let beside = within(client.read_holding_registers(0, 5)).await;
    assert_eq!(beside.expect("transport").expect("data"), [42; 5]);

    let too_many = within(client.read_holding_registers(0, 126)).await;
    assert_eq!(too_many.expect("transport"), Err(ExceptionCode::IllegalDataValue));
    let too_many_bits = within(client.read_coils(0, 2001)).await;
    assert_eq!(
        too_many_bits.expect("transport"),
        Err(ExceptionCode::IllegalDataValue)
    );
    let past_the_end = within(client.read_input_registers(65535, 2)).await;
    assert_eq!(
        past_the_end.expect("transport"),
        Err(ExceptionCode::IllegalDataAddress)
    );
    let most = within(client.read_discrete_inputs(0, 2000)).await;
    assert_eq!(most.expect("transport").expect("data").len(), 2000);

    device.heal(Table::HoldingRegisters, 5);
    let healed = within(client.read_holding_registers(3, 4)).await;
    assert_eq!(healed.expect("transport").expect("data"), [42; 4]);
}

#[tokio::test]
async fn answers_its_own_unit_id_only() {
    let device = ModbusServer::start_with_unit(Some(7)).await;
    device.set_holding(0, &[9]);
    let mut own = connect(device.addr(), 7).await.expect("connects");
    let read = within(own.read_holding_registers(0, 1)).await;
    assert_eq!(read.expect("transport").expect("data"), [9]);

    let mut other = connect(device.addr(), 8).await.expect("connects");
    let read = within(other.read_holding_registers(0, 1)).await;
    assert_eq!(read.expect("transport"), Err(ExceptionCode::GatewayTargetDevice));
}

#[tokio::test]
async fn a_dropped_connection_is_an_error_and_a_new_one_works() {
    let device = ModbusServer::start().await;
    device.set_holding(0, &[1]);
    let mut client = connect(device.addr(), 1).await.expect("connects");
    let read = within(client.read_holding_registers(0, 1)).await;
    assert_eq!(read.expect("transport").expect("data"), [1]);

    device.drop_connections();
    let read = within(client.read_holding_registers(0, 1)).await;
    assert!(
        matches!(read, Err(tokio_modbus::Error::Transport(_))),
        "a cut connection is a transport error: {read:?}"
    );

    let mut again = connect(device.addr(), 1).await.expect("reconnects");
    let read = within(again.read_holding_registers(0, 1)).await;
    assert_eq!(read.expect("transport").expect("data"), [1]);
}

#[tokio::test]
async fn restarts_on_the_same_port_with_the_same_bank() {
    let mut device = ModbusServer::start().await;
    device.set_holding(200, &[77, 78]);
    let addr = device.addr();
    let mut client = connect(addr, 1).await.expect("connects");

    device.stop().await;
    let read = within(client.read_holding_registers(200, 2)).await;
    assert!(read.is_err(), "a stopped device's connection fails: {read:?}");
    assert!(
        connect(addr, 1).await.is_err(),
        "a stopped device refuses connections"
    );

    device.restart().await;
    assert_eq!(device.addr(), addr, "the same port after the restart");
    let mut client = connect(addr, 1).await.expect("reconnects after the restart");
    let read = within(client.read_holding_registers(200, 2)).await;
    assert_eq!(read.expect("transport").expect("data"), [77, 78]);
}

#[tokio::test]
async fn a_mute_device_answers_nothing_until_it_speaks_again() {
    let device = ModbusServer::start().await;
    device.set_holding(0, &[5]);
    let mut client = connect(device.addr(), 1).await.expect("connects");
    device.set_mute(true);
    let silent = tokio::time::timeout(Duration::from_millis(300), client.read_holding_registers(0, 1)).await;
    assert!(silent.is_err(), "a mute device leaves the request unanswered");
    device.set_mute(false);
    // The unanswered exchange was cancelled mid-way, so a client starts a new connection.
    let mut client = connect(device.addr(), 1).await.expect("connects");
    let read = within(client.read_holding_registers(0, 1)).await;
    assert_eq!(read.expect("transport").expect("data"), [5]);
}
