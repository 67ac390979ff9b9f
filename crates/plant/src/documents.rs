//! The plant's documents (procedures, manuals) as ranked passages: each document is cut into
//! passages under its Markdown headings, and a query finds the best of them by BM25 (the
//! `bm25` crate's English tokenizer, stemmer, stop words and term weights), within the documents
//! that apply to the equipment asked about.
//!
//! The ranking reads an inverted index of weighted postings ([`PassageIndex`]): a query costs
//! the postings of its words, not a pass over every passage holding any of them, so a search
//! of the largest library the limits allow (500 documents, 32 MiB: about 43,000 passages) takes
//! a millisecond or two rather than the bm25 crate's scorer's 60 to 100.
//!
//! A passage keeps what a citation needs: its document's title and path, the heading it sits
//! under, and the lines it spans in the file as imported.

use std::collections::HashMap;

use bm25::{DefaultTokenizer, Embedder, EmbedderBuilder, Embedding, Language};

/// The most characters in one passage: about a paragraph or two, so a cited passage is
/// something an operator reads at a glance and a few fit in a small model's context.
pub const MAX_PASSAGE_CHARS: usize = 1_200;

/// The most distinct words of a query that are looked up (the first ones): the cost of a
/// search grows with them, and a question needs far fewer.
pub const MAX_QUERY_TERMS: usize = 32;

/// `embedding` with each word once (the first of its entries; every entry of one word has
/// the same weight). The scorer compares each query entry with each of a passage's entries,
/// so a word repeated costs as much as a new one and weighs more.
fn distinct(embedding: Embedding) -> Embedding {
    let mut seen = std::collections::HashSet::with_capacity(embedding.len());
    Embedding(
        embedding
            .0
            .into_iter()
            .filter(|entry| seen.insert(entry.index))
            .collect(),
    )
}

/// One document as the library takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryDocument {
    /// Where the file is, relative to the plant file (what a citation names).
    pub path: String,
    /// Its title.
    pub title: String,
    /// Its text (Markdown when the path ends in `.md` or `.markdown`, plain text otherwise).
    pub text: String,
    /// What it applies to.
    pub scope: DocumentScope,
}

/// What a document applies to; all empty means the whole plant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentScope {
    /// Equipment types: every instance of them.
    pub types: Vec<String>,
    /// Equipment instances, by name.
    pub equipment: Vec<String>,
    /// UNS folders: everything at or under them.
    pub folders: Vec<String>,
}

/// The equipment a search is about: an instance, its type and its UNS path.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The instance's name, e.g. `Pump1`.
    pub name: &'a str,
    /// Its equipment type, e.g. `Pump`.
    pub kind: &'a str,
    /// Its UNS path, e.g. `Plant/Area1/Pump1`.
    pub path: &'a str,
}

impl DocumentScope {
    /// Whether a document of this scope applies to `subject`.
    pub fn covers(&self, subject: &Subject<'_>) -> bool {
        let whole_plant = self.types.is_empty() && self.equipment.is_empty() && self.folders.is_empty();
        whole_plant
            || self.equipment.iter().any(|name| name == subject.name)
            || self.types.iter().any(|kind| kind == subject.kind)
            || self.folders.iter().any(|folder| {
                let folder = folder.trim_end_matches('/');
                subject.path == folder
                    || subject
                        .path
                        .strip_prefix(folder)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// A passage found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    /// The document's path.
    pub path: String,
    /// The document's title.
    pub title: String,
    /// The headings it sits under, outermost first, joined by ` > ` (empty before the first
    /// heading and in plain text).
    pub section: String,
    /// The first and last line it spans, 1-based and inclusive.
    pub lines: (usize, usize),
    /// Its text, as in the file.
    pub text: String,
    /// Its BM25 score for the query (higher is better; comparable within one search only).
    pub score: f32,
}

/// A passage as held: which document, where, and what.
#[derive(Debug)]
struct HeldPassage {
    document: usize,
    section: String,
    lines: (usize, usize),
    text: String,
}

/// The documents of a plant, cut into passages and indexed for search.
pub struct DocumentLibrary {
    documents: Vec<LibraryDocument>,
    passages: Vec<HeldPassage>,
    embedder: Embedder,
    index: PassageIndex,
}

/// Each word's postings: the passages holding it, with its BM25 weight in each (the
/// embedder's, which folds in the word's count and the passage's length).
#[derive(Debug, Default)]
struct PassageIndex {
    postings: HashMap<u32, Vec<(u32, f32)>>,
    passages: usize,
}

impl PassageIndex {
    /// Indexes passage `id`'s words (each once).
    fn insert(&mut self, id: u32, words: &Embedding) {
        for word in words.iter() {
            self.postings
                .entry(word.index)
                .or_default()
                .push((id, word.value));
        }
        self.passages += 1;
    }

    /// Every passage holding any of `query`'s words, with its score: the sum over those words
    /// of the word's inverse document frequency times its weight in the passage (BM25 as the
    /// bm25 crate scores it).
    fn scores(&self, query: &Embedding) -> Vec<(u32, f32)> {
        let mut scores = vec![0.0_f32; self.passages];
        let mut matched = Vec::new();
        for word in query.iter() {
            let Some(postings) = self.postings.get(&word.index) else {
                continue;
            };
            #[expect(clippy::cast_precision_loss, reason = "passage counts far below 2^24")]
            let (passages, holding) = (self.passages as f32, postings.len() as f32);
            let idf = (1.0 + (passages - holding + 0.5) / (holding + 0.5)).ln();
            for &(id, weight) in postings {
                let Some(score) = scores.get_mut(id as usize) else {
                    continue;
                };
                // Weights are positive: a score still 0 is a passage met the first time.
                if *score == 0.0 {
                    matched.push(id);
                }
                *score += idf * weight;
            }
        }
        matched.into_iter().map(|id| (id, scores[id as usize])).collect()
    }
}

impl std::fmt::Debug for DocumentLibrary {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DocumentLibrary")
            .field("documents", &self.documents.len())
            .field("passages", &self.passages.len())
            .finish_non_exhaustive()
    }
}

impl Default for DocumentLibrary {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl DocumentLibrary {
    /// Cuts `documents` into passages and indexes them.
    pub fn new(documents: Vec<LibraryDocument>) -> Self {
        let passages: Vec<HeldPassage> = documents
            .iter()
            .enumerate()
            .flat_map(|(index, document)| passages_of(index, document))
            .collect();
        let indexed: Vec<String> = passages
            .iter()
            .map(|passage| indexed_text(&documents[passage.document], passage))
            .collect();
        let corpus: Vec<&str> = indexed.iter().map(String::as_str).collect();
        // Stop words are kept: in procedures they carry meaning ("what to do", "do not"), and
        // BM25's inverse document frequency already weighs down words every passage has.
        let tokenizer = DefaultTokenizer::builder()
            .language_mode(Language::English)
            .stopwords(false)
            .build();
        let embedder = EmbedderBuilder::with_tokenizer_and_fit_to_corpus(tokenizer, &corpus).build();
        let mut index = PassageIndex::default();
        for (id, text) in (0_u32..).zip(&indexed) {
            index.insert(id, &distinct(embedder.embed(text)));
        }
        Self {
            documents,
            passages,
            embedder,
            index,
        }
    }

    /// The documents held.
    pub fn documents(&self) -> &[LibraryDocument] {
        &self.documents
    }

    /// How many passages the documents were cut into.
    pub fn passage_count(&self) -> usize {
        self.passages.len()
    }

    /// The best passages for `query` (its first [`MAX_QUERY_TERMS`] distinct words), best
    /// first, at most `max`: only those of documents that apply to `about` when given. A query
    /// of words no passage has finds nothing. The second value says whether more passages
    /// matched than were returned.
    pub fn search(&self, query: &str, about: Option<&Subject<'_>>, max: usize) -> (Vec<Passage>, bool) {
        let mut terms = distinct(self.embedder.embed(&searchable(query)));
        terms.0.truncate(MAX_QUERY_TERMS);
        let mut matches: Vec<(u32, f32)> = self
            .index
            .scores(&terms)
            .into_iter()
            .filter(|(id, _)| {
                about.is_none_or(|subject| {
                    self.passages
                        .get(*id as usize)
                        .is_some_and(|passage| self.documents[passage.document].scope.covers(subject))
                })
            })
            .collect();
        // Best first; file order breaks ties, so the same query always cites the same passage.
        // Only the best `max` are put in order.
        let best_first = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let more = matches.len() > max;
        if more {
            matches.select_nth_unstable_by(max, best_first);
            matches.truncate(max);
        }
        matches.sort_unstable_by(best_first);
        let found = matches
            .into_iter()
            .filter_map(|(id, score)| {
                let passage = self.passages.get(id as usize)?;
                let document = &self.documents[passage.document];
                Some(Passage {
                    path: document.path.clone(),
                    title: document.title.clone(),
                    section: passage.section.clone(),
                    lines: passage.lines,
                    text: passage.text.clone(),
                    score,
                })
            })
            .collect();
        (found, more)
    }
}

/// What is ranked of a passage: its text with its document's title and its headings, so "tank
/// overfill" finds the passages of the procedure of that name.
fn indexed_text(document: &LibraryDocument, passage: &HeldPassage) -> String {
    searchable(&format!(
        "{}\n{}\n{}",
        document.title, passage.section, passage.text
    ))
}

/// Text as it is indexed and queried: dotted and camel-cased tag names split into words
/// (`Pump1.MotorCurrent` reads as `Pump1 Motor Current`), so an operator's words find them.
fn searchable(text: &str) -> String {
    let mut words = String::with_capacity(text.len() + text.len() / 8);
    let mut previous: Option<char> = None;
    for character in text.chars() {
        match character {
            '.' | '_' if previous.is_some_and(char::is_alphanumeric) => words.push(' '),
            _ => {
                if character.is_uppercase() && previous.is_some_and(char::is_lowercase) {
                    words.push(' ');
                }
                words.push(character);
            }
        }
        previous = Some(character);
    }
    words
}

/// Whether `path` names a Markdown file (whose `#` lines are headings).
fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown")
}

/// A Markdown ATX heading's level and text (`## Response` is `(2, "Response")`).
fn heading(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.chars().take_while(|&c| c == '#').count();
    let rest = &trimmed[level..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some((level, rest.trim().trim_end_matches('#').trim_end()))
}

/// Builds passages of one section: paragraphs gathered until the next would pass
/// [`MAX_PASSAGE_CHARS`]; a longer paragraph is cut at line ends, a longer line at characters.
struct PassageCutter {
    document: usize,
    section: String,
    text: String,
    lines: Option<(usize, usize)>,
    done: Vec<HeldPassage>,
}

impl PassageCutter {
    fn new(document: usize, section: String) -> Self {
        Self {
            document,
            section,
            text: String::new(),
            lines: None,
            done: Vec::new(),
        }
    }

    /// Adds one paragraph (its lines, each with its 1-based number).
    fn paragraph(&mut self, lines: &[(usize, &str)]) {
        let size: usize = lines.iter().map(|(_, line)| line.chars().count() + 1).sum();
        if !self.text.is_empty() && self.text.chars().count() + 1 + size > MAX_PASSAGE_CHARS {
            self.finish();
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        for &(number, line) in lines {
            let mut rest = line;
            loop {
                let room = MAX_PASSAGE_CHARS.saturating_sub(self.text.chars().count());
                let cut = rest.char_indices().nth(room).map_or(rest.len(), |(at, _)| at);
                if cut == 0 && !self.text.is_empty() {
                    self.finish();
                    continue;
                }
                self.text.push_str(&rest[..cut]);
                self.lines = Some(self.lines.map_or((number, number), |(first, _)| (first, number)));
                rest = &rest[cut..];
                if rest.is_empty() {
                    break;
                }
                self.finish();
            }
            self.text.push('\n');
        }
    }

    fn finish(&mut self) {
        let text = self.text.trim_end().to_owned();
        self.text.clear();
        if let Some(lines) = self.lines.take()
            && !text.trim().is_empty()
        {
            self.done.push(HeldPassage {
                document: self.document,
                section: self.section.clone(),
                lines,
                text,
            });
        }
    }

    fn into_passages(mut self) -> Vec<HeldPassage> {
        self.finish();
        self.done
    }
}

/// One document's passages, in file order.
fn passages_of(index: usize, document: &LibraryDocument) -> Vec<HeldPassage> {
    let markdown = is_markdown(&document.path);
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut passages = Vec::new();
    let mut cutter = PassageCutter::new(index, String::new());
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    let mut fenced = false;
    for (number, line) in document.text.lines().enumerate().map(|(at, line)| (at + 1, line)) {
        if markdown && line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let found = (markdown && !fenced).then(|| heading(line)).flatten();
        if let Some((level, text)) = found {
            cutter.paragraph(&paragraph);
            paragraph.clear();
            passages.extend(cutter.into_passages());
            headings.retain(|(outer, _)| *outer < level);
            headings.push((level, text.to_owned()));
            let section = headings
                .iter()
                .map(|(_, text)| text.as_str())
                .collect::<Vec<_>>()
                .join(" > ");
            cutter = PassageCutter::new(index, section);
        } else if line.trim().is_empty() && !fenced {
            if !paragraph.is_empty() {
                cutter.paragraph(&paragraph);
                paragraph.clear();
            }
        } else {
            paragraph.push((number, line));
        }
    }
    if !paragraph.is_empty() {
        cutter.paragraph(&paragraph);
    }
    passages.extend(cutter.into_passages());
    passages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(path: &str, title: &str, text: &str, scope: DocumentScope) -> LibraryDocument {
        LibraryDocument {
            path: path.to_owned(),
            title: title.to_owned(),
            text: text.to_owned(),
            scope,
        }
    }

    const PUMP: &str = "# Pump high motor current

The motor draws more current than its rating.

## Causes

- A blocked impeller or a closed discharge valve.
- Worn bearings dragging the shaft.

## What to do

1. Check the discharge valve is open.
2. Reduce the pump speed to 80 %.
3. If the current stays high for 10 minutes, stop the pump and call maintenance.
";

    /// The index ranks as the bm25 crate's own scorer does: the same passages, the same scores.
    #[test]
    fn the_postings_score_as_the_bm25_scorer_does() {
        let library = DocumentLibrary::new(vec![
            document(
                "pump.md",
                "Pump high motor current",
                PUMP,
                DocumentScope::default(),
            ),
            document("tank.md", "Tank overfill", TANK, DocumentScope::default()),
        ]);
        let mut scorer = bm25::Scorer::<u32>::new();
        for (id, passage) in (0_u32..).zip(&library.passages) {
            let text = indexed_text(&library.documents[passage.document], passage);
            scorer.upsert(&id, distinct(library.embedder.embed(&text)));
        }
        for query in [
            "pump motor current what to do",
            "tank overfill level",
            "valve",
            "nothing matches xyz",
        ] {
            let terms = distinct(library.embedder.embed(&searchable(query)));
            let mut ours = library.index.scores(&terms);
            ours.sort_by_key(|(id, _)| *id);
            let mut theirs: Vec<(u32, f32)> = scorer
                .matches(&terms)
                .into_iter()
                .map(|scored| (scored.id, scored.score))
                .collect();
            theirs.sort_by_key(|(id, _)| *id);
            assert_eq!(ours.len(), theirs.len(), "{query}");
            for ((id, score), (their_id, their_score)) in ours.iter().zip(&theirs) {
                assert_eq!(id, their_id, "{query}");
                assert!(
                    (score - their_score).abs() < 1e-4,
                    "{query}: {score} vs {their_score}"
                );
            }
        }
    }

    const TANK: &str = "# Tank overfill

## Immediate actions

Close the inlet valve and start the transfer pump to the spare tank.

## Afterwards

Record the peak level in the shift log.
";

    const GENERAL: &str = "Plant safety rules.

Wear hearing protection in the pump hall.

In a fire, leave by the nearest exit and gather at the car park.
";

    fn corpus() -> DocumentLibrary {
        DocumentLibrary::new(vec![
            document(
                "procedures/pump.md",
                "Pump high motor current",
                PUMP,
                DocumentScope {
                    types: vec!["Pump".to_owned()],
                    ..DocumentScope::default()
                },
            ),
            document(
                "procedures/tank.md",
                "Tank overfill",
                TANK,
                DocumentScope {
                    folders: vec!["Plant/Tanks".to_owned()],
                    ..DocumentScope::default()
                },
            ),
            document("safety.txt", "Safety rules", GENERAL, DocumentScope::default()),
        ])
    }

    #[test]
    fn markdown_is_cut_under_its_headings_with_line_ranges() {
        let library = corpus();
        let (found, _) = library.search("discharge valve speed maintenance", None, 1);
        let passage = &found[0];
        assert_eq!(passage.section, "Pump high motor current > What to do");
        assert_eq!(passage.lines, (12, 14));
        assert!(
            passage.text.starts_with("1. Check the discharge valve"),
            "{passage:?}"
        );
        assert_eq!(
            (passage.title.as_str(), passage.path.as_str()),
            ("Pump high motor current", "procedures/pump.md")
        );
    }

    #[test]
    fn the_right_passage_ranks_first() {
        let library = corpus();
        for (query, section, lines) in [
            (
                "what should I do about high motor current",
                "Pump high motor current > What to do",
                (12, 14),
            ),
            (
                "what causes a high motor current",
                "Pump high motor current > Causes",
                (7, 8),
            ),
            (
                "tank is overfilling, immediate action",
                "Tank overfill > Immediate actions",
                (5, 5),
            ),
            ("where do we gather in a fire", "", (1, 5)),
            ("log the peak level", "Tank overfill > Afterwards", (9, 9)),
            ("Pump1.MotorCurrent", "Pump high motor current", (3, 3)),
        ] {
            let (found, _) = library.search(query, None, 3);
            let best = found
                .first()
                .unwrap_or_else(|| panic!("nothing found for {query:?}"));
            assert_eq!(
                (best.section.as_str(), best.lines),
                (section, lines),
                "for {query:?}: {found:#?}"
            );
        }
    }

    #[test]
    fn a_subject_sees_only_the_documents_that_apply_to_it() {
        let library = corpus();
        let pump = Subject {
            name: "Pump1",
            kind: "Pump",
            path: "Plant/Area1/Pump1",
        };
        let (found, _) = library.search("close the inlet valve", Some(&pump), 10);
        assert!(
            found.iter().all(|passage| passage.path != "procedures/tank.md"),
            "{found:#?}"
        );
        let tank = Subject {
            name: "Tank1",
            kind: "Tank",
            path: "Plant/Tanks/Tank1",
        };
        let (found, _) = library.search("close the inlet valve", Some(&tank), 10);
        assert_eq!(found[0].path, "procedures/tank.md");
        let lookalike = Subject {
            name: "Tank9",
            kind: "Tank",
            path: "Plant/TanksOld/Tank9",
        };
        let (found, _) = library.search("close the inlet valve", Some(&lookalike), 10);
        assert!(
            found.iter().all(|passage| passage.path != "procedures/tank.md"),
            "{found:#?}"
        );
    }

    #[test]
    fn results_are_capped_and_say_so() {
        let library = corpus();
        let (found, more) = library.search("pump", None, 1);
        assert_eq!(found.len(), 1);
        assert!(more);
        for nothing in ["zebra xylophone", "?! ...", ""] {
            let (found, more) = library.search(nothing, None, 5);
            assert!(found.is_empty() && !more, "{nothing:?} found {found:#?}");
        }
    }

    #[test]
    fn long_paragraphs_and_lines_are_cut_to_the_passage_size() {
        let long_line = "valve ".repeat(600);
        let text = format!("{long_line}\n\nshort tail\n");
        let library = DocumentLibrary::new(vec![document(
            "long.txt",
            "Long",
            &text,
            DocumentScope::default(),
        )]);
        assert!(library.passage_count() >= 3, "{library:?}");
        let (found, _) = library.search("valve", None, 10);
        assert!(
            found
                .iter()
                .all(|passage| passage.text.chars().count() <= MAX_PASSAGE_CHARS)
        );
        assert!(found.iter().all(|passage| passage.lines == (1, 1)), "{found:#?}");
    }

    #[test]
    fn headings_in_plain_text_and_code_fences_are_text() {
        let text = "# not a heading\nbody\n";
        let library = DocumentLibrary::new(vec![document(
            "notes.txt",
            "Notes",
            text,
            DocumentScope::default(),
        )]);
        let (found, _) = library.search("heading", None, 1);
        assert_eq!((found[0].section.as_str(), found[0].lines), ("", (1, 2)));
        let fenced = "# Real\n```\n# comment in code\n```\n";
        let library = DocumentLibrary::new(vec![document(
            "code.md",
            "Code",
            fenced,
            DocumentScope::default(),
        )]);
        let (found, _) = library.search("comment", None, 1);
        assert_eq!((found[0].section.as_str(), found[0].lines), ("Real", (2, 4)));
    }

    #[test]
    fn an_empty_library_finds_nothing() {
        let (found, more) = DocumentLibrary::default().search("anything", None, 3);
        assert!(found.is_empty() && !more);
    }
}
