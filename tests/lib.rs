//! Test support shared beyond the integration tests: the hostile clients the abuse test, the
//! soak and the benchmark all turn loose on a server, the Mosquitto broker the MQTT tests and
//! the benchmark start, HAProxy in front of several nodes, a PostgreSQL server of a test's
//! own to stop and restart, a headless Chromium for the operator panel's tests, a Modbus TCP
//! device to read and write registers on, an OPC UA server to kill and restart, and a
//! PLC-sized OPC UA server of another implementation (Python's asyncua).

pub mod asyncua;
pub mod chromium;
pub mod haproxy;
pub mod hostile;
pub mod modbus;
pub mod mosquitto;
pub mod opcua;
#[cfg(target_os = "linux")]
pub mod postgres;
