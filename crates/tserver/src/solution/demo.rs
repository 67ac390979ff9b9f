//! The demo plant `tserver init --demo` writes: a small pumping station whose names include the
//! spec's examples, alarms on its measurements, simulator motions that trip some of them
//! (Pump 1's motor runs hot at the top of its cycle; Tank 1 fills past its high limit; Tank 2
//! drains below its low limit), the simulator switched on, and a passwordless `guest` user.

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

/// (alarm name, tag, condition, limit, setpoint, deadband, priority, message)
type DemoAlarm = (
    &'static str,
    &'static str,
    &'static str,
    f64,
    Option<f64>,
    f64,
    u32,
    &'static str,
);

const ALARMS: &[DemoAlarm] = &[
    (
        "Pump1.MotorCurrent.HiHi",
        "Pump1.MotorCurrent",
        "HiHi",
        25.0,
        None,
        0.5,
        900,
        "Pump 1 motor current very high: trip risk",
    ),
    (
        "Pump1.MotorCurrent.Hi",
        "Pump1.MotorCurrent",
        "Hi",
        20.0,
        None,
        0.5,
        700,
        "Pump 1 motor current high",
    ),
    (
        "Pump1.FlowRate.Deviation",
        "Pump1.FlowRate",
        "Deviation",
        20.0,
        Some(85.0),
        2.0,
        600,
        "Pump 1 flow far from its 85 m3/h setpoint",
    ),
    (
        "Pump1.DischargePressure.Lo",
        "Pump1.DischargePressure",
        "Lo",
        2.0,
        None,
        0.2,
        600,
        "Pump 1 discharge pressure low",
    ),
    (
        "Motor1.Temperature.HiHi",
        "Motor1.Temperature",
        "HiHi",
        95.0,
        None,
        2.0,
        900,
        "Pump 1 motor winding temperature very high",
    ),
    (
        "Motor1.Temperature.Hi",
        "Motor1.Temperature",
        "Hi",
        78.0,
        None,
        2.0,
        700,
        "Pump 1 motor winding temperature high",
    ),
    (
        "Tank1.Level.Hi",
        "Tank1.Level",
        "Hi",
        85.0,
        None,
        2.0,
        700,
        "Tank 1 level high",
    ),
    (
        "Tank1.Level.LoLo",
        "Tank1.Level",
        "LoLo",
        10.0,
        None,
        2.0,
        800,
        "Tank 1 level very low: pump suction at risk",
    ),
    (
        "Tank2.Level.Lo",
        "Tank2.Level",
        "Lo",
        30.0,
        None,
        2.0,
        500,
        "Tank 2 level low",
    ),
    (
        "Tank2.Temperature.Hi",
        "Tank2.Temperature",
        "Hi",
        40.0,
        None,
        1.0,
        500,
        "Tank 2 liquid temperature high",
    ),
];

/// (tag, amplitude, period seconds, phase radians, noise)
type DemoMotion = (&'static str, f64, f64, f64, f64);

const MOTIONS: &[DemoMotion] = &[
    ("Pump1.MotorCurrent", 1.5, 600.0, 0.0, 0.2),
    ("Pump1.FlowRate", 6.0, 900.0, 1.0, 0.8),
    ("Pump1.DischargePressure", 0.3, 700.0, 2.0, 0.05),
    ("Motor1.Temperature", 20.0, 1200.0, 0.5, 0.3),
    ("Tank1.Level", 30.0, 1800.0, 0.0, 0.2),
    ("Tank2.Level", 12.0, 2400.0, 3.0, 0.2),
    ("Tank2.Temperature", 1.0, 3600.0, 0.0, 0.1),
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
    let mut insert = transaction.prepare(
        "INSERT INTO AlarmDefinitions (Name, Tag, Condition, LimitValue, Setpoint, Deadband, Priority, Message)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (name, tag, condition, limit, setpoint, deadband, priority, message) in ALARMS {
        insert.execute(params![
            name, tag, condition, limit, setpoint, deadband, priority, message
        ])?;
    }
    let mut insert = transaction.prepare(
        "INSERT INTO Simulation (Tag, Amplitude, PeriodSeconds, Phase, Noise) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (tag, amplitude, period, phase, noise) in MOTIONS {
        insert.execute(params![tag, amplitude, period, phase, noise])?;
    }
    transaction.execute(
        "INSERT INTO RuntimeSettings (Key, Value) VALUES ('SimulatorEnabled', 'true')",
        [],
    )?;
    Ok(())
}
