//! `tserver ai-execute`: one atomic Local AI call in process, as a server script's
//! `TK.AIExecute` makes it.

use anyhow::{Context, bail};
use clap::Args;

use plant::Runtime;
use store::SolutionLocation;

/// `tserver ai-execute [SOLUTION] QUERY` or `tserver ai-execute --solution SOLUTION QUERY`.
#[derive(Debug, Args)]
pub struct AiExecuteArgs {
    /// The solution, as an option.
    #[arg(long = "solution", value_name = "SOLUTION")]
    solution: Option<SolutionLocation>,
    /// The solution (unless given as --solution), then the query: plain text, or a JSON object
    /// with system, user, context and metadata.
    #[arg(value_name = "[SOLUTION] QUERY", num_args = 1..=2, required = true)]
    words: Vec<String>,
}

impl AiExecuteArgs {
    /// The solution and the query, from whichever form was given.
    pub fn solution_and_query(&self) -> anyhow::Result<(SolutionLocation, &str)> {
        match (&self.solution, self.words.as_slice()) {
            (Some(solution), [query]) => Ok((solution.clone(), query)),
            // Parsed here rather than by clap: which word is the solution depends on whether
            // --solution was given.
            (None, [solution, query]) => Ok((SolutionLocation::parse(solution)?, query)),
            (Some(_), _) => bail!("give the query once: the solution is already --solution"),
            (None, _) => bail!("give the solution and the query: `tserver ai-execute SOLUTION QUERY`"),
        }
    }
}

/// Runs `ai-execute`: one atomic call through the script toolkit, returning the envelope JSON,
/// fitted to what a server's script would get: the default frame less a reply's overhead.
#[crate::compiled_once]
pub async fn ai_execute(solution: &SolutionLocation, query: &str) -> anyhow::Result<String> {
    let runtime = Runtime::open_at(solution)
        .await
        .with_context(|| format!("cannot open solution {solution}"))?;
    runtime.local_ai().limit_envelope_bytes(
        tserver_proto::DEFAULT_MAX_FRAME - crate::calls::to_proto::REPLY_FRAME_OVERHEAD,
    );
    Ok(runtime.toolkit().ai_execute_async(query).await)
}
