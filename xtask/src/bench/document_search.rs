//! The document search scenario (`--only documents`): the largest library the limits allow (500
//! documents, 32 MiB together, the demo's own among them) imported into the demo solution, then
//! `runtime_search_documents` called one query at a time through the runtime's tool path, as the
//! chat path and RuntimeMCP call it, and timed. The runtime has one async worker, and beside the
//! searches a thread hands it a task every millisecond and records how long each waits to run
//! (reported beside the row): a search that held the worker would make that wait as long as
//! itself; one on the blocking pool leaves only the worker's wake-up.
//!
//! The measuring side runs in process (`xtask document-bench`, the build of the bench's profile).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use localai::tools::ToolCaller;
use plant_model::{MAX_DOCUMENTS, MAX_DOCUMENTS_BYTES};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::latencies::Latencies;
use super::plant_bench::{demo_with_bench_tags, import};
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{measuring_side, run_quietly};

/// The shape of a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DocumentPlan {
    /// Documents in all, the demo's own among them.
    pub(crate) documents: usize,
    /// Bytes of every document together, the demo's included.
    pub(crate) bytes: usize,
    /// Searches timed.
    pub(crate) queries: usize,
}

/// The full run's library: the limits themselves.
pub(crate) const LARGEST_LIBRARY: (usize, usize) = (MAX_DOCUMENTS, MAX_DOCUMENTS_BYTES);

/// Words of a plant's procedures, the common part of the generated text and of the queries.
const PLANT_WORDS: &[&str] = &[
    "pump",
    "valve",
    "motor",
    "current",
    "pressure",
    "tank",
    "level",
    "alarm",
    "high",
    "low",
    "flow",
    "temperature",
    "bearing",
    "vibration",
    "seal",
    "leak",
    "inlet",
    "outlet",
    "discharge",
    "suction",
    "trip",
    "reset",
    "operator",
    "check",
    "isolate",
    "drain",
    "open",
    "close",
    "start",
    "stop",
    "manual",
    "automatic",
    "setpoint",
    "controller",
    "sensor",
    "transmitter",
    "filter",
    "strainer",
    "clogged",
    "overload",
    "breaker",
    "interlock",
    "permit",
    "lockout",
    "procedure",
    "shift",
    "supervisor",
    "maintenance",
    "inspect",
    "replace",
    "lubricate",
    "cavitation",
    "overfill",
    "underflow",
    "chlorine",
    "dosing",
    "turbidity",
    "backwash",
    "blower",
    "compressor",
    "cooling",
    "water",
    "steam",
    "boiler",
    "feed",
    "return",
    "line",
    "header",
    "bypass",
    "relief",
    "safety",
    "emergency",
    "shutdown",
    "restart",
    "warning",
    "limit",
    "deviation",
    "trend",
    "history",
    "record",
    "log",
    "report",
    "area",
    "unit",
    "station",
    "panel",
    "local",
    "remote",
    "mode",
    "run",
    "fault",
    "failure",
    "cause",
    "response",
    "action",
    "the",
    "a",
    "to",
    "of",
    "and",
    "when",
    "if",
    "then",
    "do",
    "not",
    "is",
    "it",
    "on",
    "in",
    "for",
    "with",
    "after",
    "before",
    "until",
    "what",
];

/// Words a document uses beyond [`PLANT_WORDS`] (each `w` and a number), rarer the larger.
const RARE_WORDS: u64 = 20_000;

/// A repeatable random sequence (rand's seeded generator): the same library and queries every
/// run.
struct Sequence(StdRng);

impl Sequence {
    fn new(seed: u64) -> Self {
        Self(StdRng::seed_from_u64(seed))
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0.gen_range(0..bound.max(1))
    }

    /// A word as text has them: mostly the plant's words, some rare ones (skewed to the
    /// first few thousand, as a vocabulary is).
    fn word(&mut self) -> String {
        if self.below(4) == 0 {
            let rare = self.below(RARE_WORDS);
            format!("w{}", self.below(rare + 1))
        } else {
            let index = usize::try_from(self.below(PLANT_WORDS.len() as u64)).unwrap_or(0);
            PLANT_WORDS[index].to_owned()
        }
    }
}

/// Document `index` of at most `bytes` bytes, and nearly that: Markdown, a title, sections of a
/// few paragraphs.
fn document(index: usize, bytes: usize, sequence: &mut Sequence) -> String {
    let mut text = format!(
        "# Procedure {index:03}: {} {}\n",
        sequence.word(),
        sequence.word()
    );
    let mut section = 0;
    while text.len() + 200 < bytes {
        section += 1;
        text.push_str(&format!(
            "\n## Step {section}: {} {} {}\n",
            sequence.word(),
            sequence.word(),
            sequence.word()
        ));
        for _ in 0..3 {
            text.push('\n');
            let words = 40 + sequence.below(60);
            // A paragraph ends early at the document's size: never past it.
            for word in 0..words {
                if text.len() + 20 >= bytes {
                    break;
                }
                if word > 0 {
                    text.push(' ');
                }
                text.push_str(&sequence.word());
            }
            text.push_str(".\n");
            if text.len() + 200 >= bytes {
                break;
            }
        }
    }
    text
}

/// A question as an operator or a model asks it: three to eight words.
fn query(sequence: &mut Sequence) -> String {
    let words = 3 + sequence.below(6);
    (0..words).map(|_| sequence.word()).collect::<Vec<_>>().join(" ")
}

/// Makes the demo solution with the generated library in `out_dir`, then runs
/// `xtask document-bench` (the build in `bin`) against it and judges the result.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: DocumentPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let dir = out_dir.join("documents");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir.join("library"))?;
    let solution = dir.join("documents.db");
    let tserver = bin.join("tserver");
    let path = solution.to_str().context("a UTF-8 solution path")?;
    run_quietly(&tserver, &["init", path, "--demo"])?;
    let plants = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plants");
    let mut plant = demo_with_bench_tags(&plants, &solution, 0)?;
    let demo_sizes: Vec<usize> = std::fs::read_dir(dir.join("procedures"))?
        .filter_map(Result::ok)
        .filter_map(|entry| entry.metadata().ok())
        .map(|metadata| usize::try_from(metadata.len()).unwrap_or(usize::MAX))
        .collect();
    let demo_bytes: usize = demo_sizes.iter().sum();
    let count = plan.documents.saturating_sub(demo_sizes.len());
    // Each generated document a little under its share, so the library stays within the limit
    // whatever a document's last section adds.
    let each = plan.bytes.saturating_sub(demo_bytes) / count.max(1) * 99 / 100;
    let mut sequence = Sequence::new(0x5eed);
    let mut generated = 0;
    for index in 0..count {
        let text = document(index, each, &mut sequence);
        generated += text.len();
        std::fs::write(dir.join(format!("library/procedure-{index:03}.md")), text)?;
        plant.push_str(&format!(
            "\n[[documents]]\npath = \"library/procedure-{index:03}.md\"\n"
        ));
    }
    import(&tserver, &solution, &plant)?;
    let queries: Vec<String> = (0..plan.queries).map(|_| query(&mut sequence)).collect();
    let queries_file = dir.join("queries.json");
    std::fs::write(&queries_file, serde_json::to_string(&queries)?)?;
    let mut report = measuring_side(
        &bin.join("xtask"),
        "document-bench",
        &[path, queries_file.to_str().context("a UTF-8 path")?],
    )?;
    let bytes = generated + demo_bytes;
    report["libraryBytes"] = bytes.into();
    let search = &report["search"];
    let lateness = &report["workerWait"];
    let documents = report["documents"].as_u64().unwrap_or(0);
    eprintln!(
        "{:<28} {documents} documents, {:.1} MiB, {} passages indexed in {:.1} s; search p50 {:.0} us p99 {:.0} us; a task's wait for the async worker p99 {:.0} us",
        "tserver document search",
        bytes as f64 / 1_048_576.0,
        report["passages"],
        report["indexSeconds"].as_f64().unwrap_or(0.0),
        search["p50Us"].as_f64().unwrap_or(0.0),
        search["p99Us"].as_f64().unwrap_or(0.0),
        lateness["p99Us"].as_f64().unwrap_or(0.0),
    );
    let errors = report["errors"].as_u64().unwrap_or(u64::MAX);
    verdicts.judge(
        format!(
            "document search, {documents} documents of {:.1} MiB, 1 in flight, p99",
            bytes as f64 / 1_048_576.0
        ),
        format!(
            "{:.1} ms (p50 {:.1} ms) over {} queries, {} passages",
            search["p99Us"].as_f64().unwrap_or(0.0) / 1000.0,
            search["p50Us"].as_f64().unwrap_or(0.0) / 1000.0,
            search["samples"],
            report["passages"],
        ),
        verdicts::DOCUMENT_SEARCH,
        search["p99Us"].as_f64().unwrap_or(f64::INFINITY),
        errors == 0,
    );
    results.insert("document search", report);
    Ok(())
}

/// `xtask document-bench SOLUTION QUERIES_JSON`: opens the solution in this process, waits for
/// its documents to be indexed, then runs each query through `runtime_search_documents` in
/// turn while another thread times how long the async worker takes to run a task handed to it;
/// prints the timings as JSON.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [solution, queries] = args else {
        bail!("usage: xtask document-bench SOLUTION QUERIES_JSON");
    };
    let queries: Vec<String> = serde_json::from_str(
        &std::fs::read_to_string(queries).with_context(|| format!("cannot read {queries}"))?,
    )
    .with_context(|| format!("{queries}: a JSON list of queries"))?;
    // One async worker: a search run on it would keep every other task waiting.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let report = runtime.block_on(search_all(Path::new(solution), &queries))?;
    println!("{report}");
    Ok(())
}

async fn search_all(solution: &Path, queries: &[String]) -> anyhow::Result<Value> {
    let opened = Instant::now();
    let runtime = tserver::Runtime::open(solution)?;
    let deadline = opened + Duration::from_secs(300);
    while runtime.plant().reader().library().is_indexing() {
        if Instant::now() > deadline {
            bail!("the documents were not indexed within 300 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let index_seconds = opened.elapsed().as_secs_f64();
    let library = runtime.plant().reader().library();
    let (documents, passages) = (
        library.documents().documents().len(),
        library.documents().passage_count(),
    );
    drop(library);

    let stop = CancellationToken::new();
    let prober = {
        let (stop, worker) = (stop.clone(), tokio::runtime::Handle::current());
        std::thread::spawn(move || worker_waits(&stop, &worker))
    };
    let caller = ToolCaller::Client {
        connection: uuid::Uuid::new_v4(),
        user: Arc::from("guest"),
    };
    let mut timings = Latencies::default();
    let mut errors = 0_u64;
    let mut first_error = None;
    for query in queries {
        let started = Instant::now();
        let outcome = runtime
            .call_tool(
                "runtime_search_documents",
                json!({"query": query, "max_passages": 3}),
                caller.clone(),
            )
            .await;
        timings.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
        match outcome {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("{error:?}"));
            }
            Err(closed) => {
                errors += 1;
                first_error.get_or_insert_with(|| closed.to_string());
            }
        }
    }
    stop.cancel();
    let waits = prober
        .join()
        .map_err(|_| anyhow::anyhow!("the prober thread failed"))?;
    Ok(json!({
        "documents": documents,
        "passages": passages,
        "indexSeconds": index_seconds,
        "search": timings.to_json(),
        "workerWait": waits.to_json(),
        "errors": errors,
        "firstError": first_error,
    }))
}

/// Every millisecond until `stop`, hands `worker` a task and records how long it waited to run.
fn worker_waits(stop: &CancellationToken, worker: &tokio::runtime::Handle) -> Latencies {
    let mut waits = Latencies::default();
    while !stop.is_cancelled() {
        std::thread::sleep(Duration::from_millis(1));
        let handed = Instant::now();
        let waited = futures::executor::block_on(worker.spawn(async move { handed.elapsed() }));
        if let Ok(waited) = waited {
            waits.push(u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX));
        }
    }
    waits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_document_is_markdown_of_about_its_size() {
        let mut sequence = Sequence::new(1);
        let text = document(7, 20_000, &mut sequence);
        assert!(text.starts_with("# Procedure 007: "), "{}", &text[..40]);
        assert!(text.contains("\n## Step 1: "));
        assert!((19_000..=20_000).contains(&text.len()), "{}", text.len());
    }

    #[test]
    fn the_library_and_queries_are_the_same_every_run() {
        let (mut one, mut two) = (Sequence::new(9), Sequence::new(9));
        assert_eq!(document(1, 5_000, &mut one), document(1, 5_000, &mut two));
        assert_eq!(query(&mut one), query(&mut two));
        let words = query(&mut Sequence::new(3)).split(' ').count();
        assert!((3..=8).contains(&words), "{words}");
    }
}
