//! The documents a plant file attaches: each file's bytes checked (size, UTF-8) into text, and
//! every document of a plant file read at once, each problem reported at the plant file's line
//! of its `path`, as the reader reports the file's own.

use crate::document::{self, Format};
use crate::model::PlantModel;
use crate::reader::{item, lookup};
use crate::{MAX_DOCUMENT_BYTES, MAX_DOCUMENTS_BYTES, PlantError, PlantErrors};

/// A document as the solution keeps it and the runtime searches it: where it is, the title
/// it goes by, its text, and what it is about (all empty: the whole plant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantDocument {
    /// Its path relative to the plant file, as the file writes it.
    pub path: String,
    /// The title it goes by (see [`DocumentSpec::title_in`](crate::DocumentSpec::title_in)).
    pub title: String,
    /// Its text.
    pub text: String,
    /// The equipment types it is about.
    pub types: Vec<String>,
    /// The equipment instances it is about.
    pub equipment: Vec<String>,
    /// The UNS folders it is about.
    pub folders: Vec<String>,
}

/// Why a document's bytes are not a document's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentTextError {
    /// Past [`MAX_DOCUMENT_BYTES`].
    #[error("has more than {MAX_DOCUMENT_BYTES} bytes; a document may have at most {MAX_DOCUMENT_BYTES}")]
    TooLarge,
    /// Not UTF-8: where the first byte that is not.
    #[error("is not UTF-8 text: at line {line}, column {column} byte 0x{byte:02x} is not")]
    NotUtf8 {
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// The byte.
        byte: u8,
    },
}

/// A document's text from its bytes (read with a bound a little past [`MAX_DOCUMENT_BYTES`],
/// so a larger file shows as one).
pub fn document_text(bytes: Vec<u8>) -> Result<String, DocumentTextError> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(DocumentTextError::TooLarge);
    }
    String::from_utf8(bytes).map_err(|error| {
        let valid = error.utf8_error().valid_up_to();
        let bytes = error.as_bytes();
        // Everything before `valid` is UTF-8 by the error's word.
        let before = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        DocumentTextError::NotUtf8 {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            byte: bytes[valid],
        }
    })
}

/// Reads every document `model` attaches (the model `text` was read into by [`crate::read`]):
/// `load` gives a file's bytes by its path as the plant file writes it (at most a little past
/// [`MAX_DOCUMENT_BYTES`]) or says why it cannot. Every problem is reported, each at its
/// `documents[i].path`; the documents together may have at most [`MAX_DOCUMENTS_BYTES`].
pub fn read_documents(
    text: &str,
    format: Format,
    file: &str,
    model: &PlantModel,
    mut load: impl FnMut(&str) -> Result<Vec<u8>, String>,
) -> Result<Vec<PlantDocument>, PlantErrors> {
    let fail = |errors: Vec<PlantError>| PlantErrors {
        file: file.to_owned(),
        errors,
    };
    if model.documents.is_empty() {
        return Ok(Vec::new());
    }
    let root = document::parse(text, format).map_err(|error| fail(vec![error]))?;
    let mut documents = Vec::with_capacity(model.documents.len());
    let mut errors = Vec::new();
    let mut total = 0_usize;
    for (index, spec) in model.documents.iter().enumerate() {
        let span = lookup(&root, "documents")
            .and_then(|list| item(list, index))
            .and_then(|entry| lookup(entry, "path"))
            .map_or(0..0, |node| node.span.clone());
        let field = format!("documents[{index}].path");
        let problem = match load(&spec.path) {
            Err(reason) => Some(format!("cannot read {:?}: {reason}", spec.path)),
            Ok(bytes) => match document_text(bytes) {
                Err(error) => Some(format!("{:?} {error}", spec.path)),
                Ok(document) => {
                    total = total.saturating_add(document.len());
                    let past = (total > MAX_DOCUMENTS_BYTES).then(|| {
                        format!(
                            "the documents up to {:?} have {total} bytes; together they may have at most \
                             {MAX_DOCUMENTS_BYTES}",
                            spec.path
                        )
                    });
                    documents.push(PlantDocument {
                        path: spec.path.clone(),
                        title: spec.title_in(&document),
                        text: document,
                        types: spec.types.clone(),
                        equipment: spec.equipment.clone(),
                        folders: spec.folders.clone(),
                    });
                    past
                }
            },
        };
        if let Some(message) = problem {
            errors.push(PlantError::at(text, span, field, message));
            if total > MAX_DOCUMENTS_BYTES || errors.len() >= crate::reader::MAX_ERRORS {
                break;
            }
        }
    }
    if errors.is_empty() {
        Ok(documents)
    } else {
        Err(fail(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DocumentSpec, read};

    const PLANT: &str = r#"
[[folders]]
path = "Plant/Area1"

[[types]]
name = "Pump"

  [[types.tags]]
  name = "Running"
  type = "bool"

[[equipment]]
name = "Pump1"
type = "Pump"
path = "Plant/Area1/Pump1"

[[tags]]
name = "Tank1.Level"
path = "Plant/Area2/Tank1/Level"
type = "number"

[[documents]]
path = "procedures/pump-high-current.md"
types = ["Pump"]
equipment = ["Pump1"]
folders = ["Plant/Area1", "Plant/Area2/Tank1"]

[[documents]]
path = "site-rules.txt"
title = "Site rules"
"#;

    fn errors(text: &str) -> Vec<String> {
        read(text, Format::Toml, "f")
            .expect_err("refused")
            .errors
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn documents_read_and_export_back() {
        let model = read(PLANT, Format::Toml, "plant.toml").expect("valid");
        assert_eq!(
            model.documents[0],
            DocumentSpec {
                path: "procedures/pump-high-current.md".to_owned(),
                title: String::new(),
                types: vec!["Pump".to_owned()],
                equipment: vec!["Pump1".to_owned()],
                folders: vec!["Plant/Area1".to_owned(), "Plant/Area2/Tank1".to_owned()],
            }
        );
        let exported = model.to_toml().expect("exports");
        assert_eq!(read(&exported, Format::Toml, "again.toml").expect("reads"), model);
        let stored = model.to_json().expect("stores");
        assert_eq!(PlantModel::from_json(&stored).expect("loads"), model);
    }

    #[test]
    fn a_document_names_only_what_the_plant_has_and_stays_beside_the_file() {
        let text = PLANT
            .replace(r#"types = ["Pump"]"#, r#"types = ["Pumps"]"#)
            .replace(r#"equipment = ["Pump1"]"#, r#"equipment = ["Pump1", "Pump7"]"#)
            .replace(r#""Plant/Area2/Tank1"]"#, r#""Plant/Area2/Tank"]"#)
            .replace(r#"path = "site-rules.txt""#, r#"path = "../rules.txt""#);
        assert_eq!(
            errors(&text),
            [
                "24:10: documents[0].types[0]: no type named \"Pumps\" (did you mean \"Pump\"?)",
                "25:23: documents[0].equipment[1]: no equipment instance named \"Pump7\" (did you mean \"Pump1\"?)",
                "26:27: documents[0].folders[1]: no folder named \"Plant/Area2/Tank\" (did you mean \"Plant/Area2/Tank1\"?)",
                "29:8: documents[1].path: \"../rules.txt\" leaves the plant file's folder: no `..` (export writes the file back there)",
            ]
        );
        for (path, wanted) in [
            ("/etc/passwd", "is not a relative path"),
            ("C:/rules.txt", "is not a relative path"),
            ("a\\\\b.txt", "is not a relative path"),
            ("a//b.txt", "no empty or `.` segments"),
            ("", "is not a usable document path"),
        ] {
            let text = PLANT.replace("site-rules.txt", path);
            let found = errors(&text);
            assert!(
                found.iter().any(|error| error.contains(wanted)),
                "{path}: {found:?}"
            );
        }
        let missing = PLANT.replace(r#"path = "site-rules.txt""#, "");
        assert_eq!(errors(&missing), ["28:1: documents[1].path: is required"]);
        let twice = PLANT.replace("site-rules.txt", "Procedures/Pump-High-Current.md");
        assert_eq!(
            errors(&twice),
            ["29:8: documents[1].path: \"Procedures/Pump-High-Current.md\" is attached twice"]
        );
        let unknown = PLANT.replace(r#"title = "Site rules""#, r#"tittle = "Site rules""#);
        assert!(errors(&unknown)[0].contains("documents[1].tittle: unknown key (did you mean `title`?)"));
    }

    #[test]
    fn every_document_is_read_with_its_problems_at_its_path() {
        let model = read(PLANT, Format::Toml, "plant.toml").expect("valid");
        let read_all = |load: &dyn Fn(&str) -> Result<Vec<u8>, String>| {
            read_documents(PLANT, Format::Toml, "plant.toml", &model, load)
        };
        let documents = read_all(&|path| {
            Ok(match path {
                "site-rules.txt" => b"Wear a helmet.".to_vec(),
                _ => b"Intro\n# Pump high current\n\nStop the pump.".to_vec(),
            })
        })
        .expect("read");
        let titles: Vec<&str> = documents.iter().map(|document| document.title.as_str()).collect();
        assert_eq!(titles, ["Pump high current", "Site rules"]);
        assert_eq!(documents[0].folders, ["Plant/Area1", "Plant/Area2/Tank1"]);
        let errors = read_all(&|path| match path {
            "site-rules.txt" => Err("No such file or directory (os error 2)".to_owned()),
            _ => Ok(b"ok\n\xfe".to_vec()),
        })
        .expect_err("refused");
        assert_eq!(
            errors.to_string(),
            "plant.toml:23:8: documents[0].path: \"procedures/pump-high-current.md\" is not UTF-8 text: \
             at line 2, column 1 byte 0xfe is not\n\
             plant.toml:29:8: documents[1].path: cannot read \"site-rules.txt\": No such file or directory (os error 2)"
        );
        let untitled = DocumentSpec {
            path: "notes/plain.txt".to_owned(),
            title: String::new(),
            types: Vec::new(),
            equipment: Vec::new(),
            folders: Vec::new(),
        };
        assert_eq!(untitled.title_in("no heading here"), "plain.txt");
        assert_eq!(untitled.title_in("# Not a heading in plain text"), "plain.txt");
    }

    #[test]
    fn a_plant_attaches_at_most_the_bound_of_documents() {
        let mut text = String::new();
        for index in 0..=crate::MAX_DOCUMENTS {
            text.push_str(&format!("[[documents]]\npath = \"notes/{index}.md\"\n"));
        }
        assert_eq!(
            errors(&text),
            ["1001:1: documents[500]: the plant attaches 501 documents; at most 500 may be attached"]
        );
    }

    #[test]
    fn text_that_is_not_utf8_is_placed_by_line_and_column() {
        let bytes = b"# Title\nab\xffcd\n".to_vec();
        assert_eq!(
            document_text(bytes),
            Err(DocumentTextError::NotUtf8 {
                line: 2,
                column: 3,
                byte: 0xff
            })
        );
    }

    #[test]
    fn text_past_the_bound_is_refused() {
        assert_eq!(
            document_text(vec![b'a'; MAX_DOCUMENT_BYTES + 1]),
            Err(DocumentTextError::TooLarge)
        );
        assert_eq!(document_text(b"ok".to_vec()).as_deref(), Ok("ok"));
    }
}
