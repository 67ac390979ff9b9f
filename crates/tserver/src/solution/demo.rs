//! The demo plant `tserver init --demo` writes: a small pumping station whose names include the
//! spec's examples, and a passwordless `guest` user.

use rusqlite::{Transaction, params};

/// (name, UNS path, type, units, description, range low, range high, initial value)
type DemoTag = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<f64>,
    Option<f64>,
    &'static str,
);

const TAGS: &[DemoTag] = &[
    (
        "Pump1.MotorCurrent",
        "Plant/Area1/Pump1/MotorCurrent",
        "number",
        "A",
        "Pump 1 drive motor current",
        Some(0.0),
        Some(30.0),
        "12.4",
    ),
    (
        "Pump1.FlowRate",
        "Plant/Area1/Pump1/FlowRate",
        "number",
        "m3/h",
        "Pump 1 discharge flow rate",
        Some(0.0),
        Some(120.0),
        "84.0",
    ),
    (
        "Pump1.DischargePressure",
        "Plant/Area1/Pump1/DischargePressure",
        "number",
        "bar",
        "Pump 1 discharge pressure",
        Some(0.0),
        Some(10.0),
        "4.2",
    ),
    (
        "Pump1.Running",
        "Plant/Area1/Pump1/Running",
        "bool",
        "",
        "Pump 1 run feedback",
        None,
        None,
        "true",
    ),
    (
        "Pump1.Mode",
        "Plant/Area1/Pump1/Mode",
        "text",
        "",
        "Pump 1 control mode (Auto, Manual, Off)",
        None,
        None,
        "Auto",
    ),
    (
        "Pump1.StartCount",
        "Plant/Area1/Pump1/StartCount",
        "integer",
        "",
        "Pump 1 starts since commissioning",
        Some(0.0),
        None,
        "1284",
    ),
    (
        "Motor1.Temperature",
        "Plant/Area1/Pump1/Motor1/Temperature",
        "number",
        "degC",
        "Pump 1 motor winding temperature",
        Some(0.0),
        Some(150.0),
        "61.5",
    ),
    (
        "Pump2.MotorCurrent",
        "Plant/Area1/Pump2/MotorCurrent",
        "number",
        "A",
        "Pump 2 drive motor current",
        Some(0.0),
        Some(30.0),
        "0.0",
    ),
    (
        "Pump2.FlowRate",
        "Plant/Area1/Pump2/FlowRate",
        "number",
        "m3/h",
        "Pump 2 discharge flow rate",
        Some(0.0),
        Some(120.0),
        "0.0",
    ),
    (
        "Pump2.Running",
        "Plant/Area1/Pump2/Running",
        "bool",
        "",
        "Pump 2 run feedback",
        None,
        None,
        "false",
    ),
    (
        "Tank1.Level",
        "Plant/Area1/Tank1/Level",
        "number",
        "%",
        "Tank 1 level",
        Some(0.0),
        Some(100.0),
        "62.0",
    ),
    (
        "Tank2.Level",
        "Plant/Area2/Tank2/Level",
        "number",
        "%",
        "Tank 2 level",
        Some(0.0),
        Some(100.0),
        "38.5",
    ),
    (
        "Tank2.Temperature",
        "Plant/Area2/Tank2/Temperature",
        "number",
        "degC",
        "Tank 2 liquid temperature",
        Some(0.0),
        Some(100.0),
        "24.1",
    ),
];

/// Writes the demo plant into a freshly created solution.
pub(super) fn populate(transaction: &Transaction<'_>) -> rusqlite::Result<()> {
    transaction.execute(
        "INSERT INTO Users (Name, PasswordHash) VALUES ('guest', NULL)",
        [],
    )?;
    // Tools and chat history on; the model itself stays off until the user points the
    // solution at an endpoint and opts in (ModelEnabled), as in a plain solution.
    transaction.execute("UPDATE SolutionSettings SET ModelOptions = ?1", [0x9e_i64])?;
    let mut insert = transaction.prepare(
        "INSERT INTO Tags (Name, Path, Type, Units, Description, RangeLow, RangeHigh, InitialValue)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (name, path, kind, units, description, low, high, initial) in TAGS {
        insert.execute(params![name, path, kind, units, description, low, high, initial])?;
    }
    Ok(())
}
