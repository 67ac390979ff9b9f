//! A secret never reaches the logs: every path that could print it runs at trace level with
//! the output captured, and the value appears nowhere in it.

use std::io::Write;
use std::sync::{Arc, Mutex};

use scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;
use tracing_subscriber::fmt::MakeWriter;
use tserver::Runtime;

use crate::support::{Solution, admin};

const CANARY: &str = "sk-canary-never-logged-93c1";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[test]
fn no_path_prints_a_secret_even_at_trace_level() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let mut envelopes = Vec::new();
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        runtime.block_on(async {
            let llm = ScriptedLlm::start([
                Reply::text("fine"),
                Reply::status(
                    401,
                    json!({"error": {"message": format!("Incorrect API key provided: {CANARY}")}}),
                ),
                Reply::Close,
            ])
            .await
            .expect("llm");
            let solution = Solution::demo();
            let path = solution.path.to_str().expect("utf-8");
            admin(&["secrets", path, "set", "ApiKey"], &format!("{CANARY}\n"));
            admin(&["settings", path, "set", "ModelEnabled", "true"], "");
            admin(
                &[
                    "settings",
                    path,
                    "set",
                    "URL",
                    &format!("{}?k=/secret:ApiKey", llm.url()),
                ],
                "",
            );
            admin(
                &[
                    "settings",
                    path,
                    "set",
                    "Authorization",
                    "BearerToken\n/secret:ApiKey",
                ],
                "",
            );
            admin(&["settings", path, "set", "Headers", "X-Key: /secret:ApiKey"], "");
            let toolkit = Runtime::open(&solution.path).expect("opens").toolkit();
            // ok, an error body echoing the key, a dropped connection.
            for _ in 0..3 {
                envelopes.push(toolkit.ai_execute_async("hello").await);
            }
            // Connection refused with the secret in the URL, and a broken auth line.
            admin(
                &[
                    "settings",
                    path,
                    "set",
                    "URL",
                    "http://127.0.0.1:1/v1?k=/secret:ApiKey",
                ],
                "",
            );
            envelopes.push(toolkit.ai_execute_async("hello").await);
            admin(
                &[
                    "settings",
                    path,
                    "set",
                    "Authorization",
                    "CustomAuth\n/secret:ApiKey",
                ],
                "",
            );
            envelopes.push(toolkit.ai_execute_async("hello").await);
            assert_eq!(
                llm.requests()[0].header("x-key"),
                Some(CANARY),
                "the secret did reach the wire"
            );
        });
    });
    let logs = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    assert!(logs.contains("atomic POST"), "the capture saw the calls:\n{logs}");
    assert!(!logs.contains(CANARY), "a secret leaked into the logs:\n{logs}");
    for envelope in &envelopes {
        assert!(
            !envelope.contains(CANARY),
            "a secret leaked into an envelope: {envelope}"
        );
    }
    let statuses: Vec<_> = envelopes
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).expect("json")["status"].clone())
        .collect();
    assert_eq!(statuses, ["ok", "error", "error", "error", "error"]);
}
