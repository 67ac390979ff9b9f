//! The demo plant `tserver init --demo` writes: the pumping station of
//! `examples/plants/demo.toml` (its names include the spec's examples; its simulator motions
//! trip some alarms now and then) with its documents, the simulator switched on, and a
//! passwordless `guest` user.

use rusqlite::Transaction;

use super::SolutionError;

/// The demo plant file, as the repository holds it.
const DEMO_PLANT: &str = include_str!("../../../examples/plants/demo.toml");

/// Where the demo plant file is in the repository (the import's source name).
const DEMO_PLANT_FILE: &str = "examples/plants/demo.toml";

/// The documents the demo plant attaches, by their paths in its file.
const DEMO_DOCUMENTS: [(&str, &str); 2] = [
    (
        "procedures/pump-high-motor-current.md",
        include_str!("../../../examples/plants/procedures/pump-high-motor-current.md"),
    ),
    (
        "procedures/tank-overfill.md",
        include_str!("../../../examples/plants/procedures/tank-overfill.md"),
    ),
];

/// The demo's script: an operator note from the assistant when Tank 1 runs high.
const TANK_NOTE: &str = include_str!("../../../examples/scripts/tank_note.rhai");

/// Writes the demo plant into a freshly created solution.
pub(super) fn populate(transaction: &Transaction<'_>) -> Result<(), SolutionError> {
    transaction.execute(
        "INSERT INTO Users (Name, PasswordHash, Role) VALUES ('guest', NULL, 'operator')",
        [],
    )?;
    // Tools, proposals (Pump1.Mode is proposable) and chat history on; the model itself stays
    // off until the user points the solution at an endpoint and opts in (ModelEnabled), as in a
    // plain solution.
    transaction.execute("UPDATE SolutionSettings SET ModelOptions = ?1", [0xde_i64])?;
    let (model, documents) = demo_plant().map_err(|errors| SolutionError::InvalidTag {
        name: "(demo plant)".to_owned(),
        reason: errors.to_string(),
    })?;
    super::plant::write_plant(transaction, &model, &documents, DEMO_PLANT_FILE)?;
    transaction.execute(
        "INSERT INTO RuntimeSettings (Key, Value) VALUES ('SimulatorEnabled', 'true')",
        [],
    )?;
    transaction.execute(
        "INSERT INTO Scripts (Name, Trigger, Source, Enabled, UpdatedAt) VALUES ('TankNote', 'alarm:Tank1.Level.Hi', ?1, 1, ?2)",
        rusqlite::params![TANK_NOTE, super::millis(std::time::SystemTime::now())],
    )?;
    Ok(())
}

/// The demo plant and its documents, read as an import reads a file.
fn demo_plant() -> Result<(plant_model::PlantModel, Vec<plant_model::PlantDocument>), plant_model::PlantErrors>
{
    let format = plant_model::Format::Toml;
    let model = plant_model::read(DEMO_PLANT, format, DEMO_PLANT_FILE)?;
    let documents = plant_model::read_documents(DEMO_PLANT, format, DEMO_PLANT_FILE, &model, |path| {
        DEMO_DOCUMENTS
            .iter()
            .find(|(known, _)| *known == path)
            .map(|(_, text)| text.as_bytes().to_vec())
            .ok_or_else(|| "the demo holds no such document".to_owned())
    })?;
    Ok((model, documents))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_plant_file_reads_with_its_documents() {
        let (model, documents) = demo_plant().expect("valid");
        let expanded = model.expand();
        assert_eq!((expanded.tags.len(), expanded.alarms.len()), (14, 10));
        let titles: Vec<&str> = documents.iter().map(|document| document.title.as_str()).collect();
        assert_eq!(titles, ["Pump 1 high motor current", "Tank overfill"]);
    }

    #[test]
    fn the_demo_script_compiles() {
        assert_eq!(solution_scripts::compile_check(TANK_NOTE), Ok(()));
    }
}
