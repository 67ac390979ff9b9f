//! The names of the metrics the plant records (the server's `telemetry` describes and exports
//! them with its own).

/// Script runs, by `outcome` (`ok`, `failed`, `operations`, `timeout`, ...).
pub const SCRIPT_RUNS: &str = "tserver_script_runs_total";
/// MQTT messages received by the sources.
pub const MQTT_MESSAGES: &str = "tserver_mqtt_messages_total";
/// MQTT messages refused, by `kind` (`bad_payload`, `wrong_type`, ...: the source's error kinds).
pub const MQTT_REFUSED: &str = "tserver_mqtt_refused_messages_total";
/// Modbus poll cycles completed (every read of a source's plan answered).
pub const MODBUS_POLLS: &str = "tserver_modbus_polls_total";
