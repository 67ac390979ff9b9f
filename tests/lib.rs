//! Test support shared beyond the integration tests: the hostile clients the abuse test, the
//! soak and the benchmark all turn loose on a server, the Mosquitto broker the MQTT tests and
//! the benchmark start, and HAProxy in front of several nodes.

pub mod haproxy;
pub mod hostile;
pub mod mosquitto;
