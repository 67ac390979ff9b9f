//! The operator panel in a real headless Chromium (chromedriver, WebDriver) against a real
//! `tserver serve --http` process with the demo model stand-in: the page and its policy, the
//! login, live values, writes with confirmation, trends, alarms and acknowledgement by role,
//! the assistant's streamed answers and tool trace, cancel and clear, a reload that keeps the
//! session, a server lost and back, and a write to a field-bound tag (a real Mosquitto) sent to
//! the field, then shown as the field reports it; proposals (the assistant's in its answer,
//! another client's in the pending list) approved, declined with a comment, or refused to a
//! viewer. Every screen is saved under `target/panel-screenshots/` for a person to look at.

use std::net::SocketAddr;
use std::time::Duration;

use scripted_llm::{RecordedRequest, Reply, Responder, ScriptedLlm};
use serde_json::{Value, json};
use service_client::{Client, ClientOptions, TagValue as WireValue, TagWrite, WriteValue};
use tserver_demo::DemoModel;
use tserver_tests::chromium::{Browser, Chromedriver, PANEL_PC};

use crate::mqtt_sources::{ROOT, bind, plant_with};
use crate::operator_writes::solution_with_writable_tags;
use crate::proposals::{proposable_solution, propose_by_call};
use crate::support::{ServerProcess, Solution, admin};
use tserver_tests::mosquitto::{Mosquitto, Publisher};

/// The policy every panel response carries.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

pub(crate) const PHONE: (u32, u32) = (390, 844);

/// The question the model stand-in answers only after a long wait (a turn to cancel).
const SLOW_QUESTION: &str = "Think slowly about Tank 2";

/// The question the model stand-in answers by proposing to switch Pump 1 to Manual.
const PROPOSE_QUESTION: &str = "Tank 1 is overfilling, what should I do?";

/// The demo's rule-based model, but a question naming [`SLOW_QUESTION`] waits a long time and
/// [`PROPOSE_QUESTION`] gets a proposal.
struct PanelModel;

impl Responder for PanelModel {
    fn respond(&self, request: &RecordedRequest) -> Reply {
        let body = String::from_utf8_lossy(&request.body);
        if body.contains(SLOW_QUESTION) {
            return Reply::Delayed(Duration::from_secs(120), Box::new(Reply::Content("late".into())));
        }
        proposing(request).unwrap_or_else(|| DemoModel.respond(request))
    }
}

/// To [`PROPOSE_QUESTION`]: first the proposal, then, told that it waits, the answer.
fn proposing(request: &RecordedRequest) -> Option<Reply> {
    let post = request.json()?;
    let messages = post["messages"].as_array()?;
    let asked = messages.iter().rev().find(|message| message["role"] == "user")?["content"].as_str()?;
    if !asked.contains(PROPOSE_QUESTION) {
        return None;
    }
    Some(if messages.last()?["role"] == "tool" {
        Reply::text("I proposed switching Pump 1 to Manual; an operator decides.")
    } else {
        Reply::ToolCalls(vec![(
            "call_mode".to_owned(),
            "runtime_propose_write".to_owned(),
            json!({"tag": "Pump1.Mode", "value": "Manual", "reason": "the level is high; run the pump by hand"})
                .to_string(),
        )])
    })
}

/// A solution, its server process with `--http` on a port kept across restarts, and the model.
pub(crate) struct PanelRig {
    pub(crate) solution: Solution,
    http: SocketAddr,
    server: Option<ServerProcess>,
    _model: ScriptedLlm,
}

impl PanelRig {
    pub(crate) async fn start(solution: Solution) -> Self {
        let path = solution.path.to_str().expect("utf-8 path").to_owned();
        let model = ScriptedLlm::start_with(PanelModel)
            .await
            .expect("the model starts");
        admin(&["settings", &path, "set", "URL", &model.url()], "");
        admin(&["settings", &path, "set", "ModelEnabled", "true"], "");
        let http = tserver_tests::haproxy::free_loopback_addr();
        let mut rig = Self {
            solution,
            http,
            server: None,
            _model: model,
        };
        rig.restart();
        rig
    }

    /// Starts (again) the server process on the same HTTP port.
    fn restart(&mut self) {
        self.server = Some(ServerProcess::start(
            &self.solution.path,
            &["--http", &self.http.to_string()],
            &[],
        ));
    }

    fn kill(&mut self) {
        self.server = None;
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    /// A framed-protocol client logged in as the demo's `guest` (an operator).
    pub(crate) async fn guest(&self) -> Client {
        let addr = self.server.as_ref().expect("a running server").addr;
        let client = Client::connect(addr, ClientOptions::default())
            .await
            .expect("connects");
        client.login("guest", "").await.expect("guest logs in");
        client
    }
}

fn add_user(solution: &Solution, name: &str, password: &str, role: &str) {
    let path = solution.path.to_str().expect("utf-8 path");
    admin(
        &["users", path, "add", name, "--role", role],
        &format!("{password}\n"),
    );
}

pub(crate) async fn write(client: &Client, name: &str, value: WriteValue) {
    let results = client
        .write_tags(vec![TagWrite {
            name: name.to_owned(),
            value: Some(value),
        }])
        .await
        .expect("written");
    assert!(results[0].error.is_empty(), "{results:?}");
}

/// Records every Content-Security-Policy violation from now on, for [`assert_no_violations`].
async fn watch_policy(browser: &Browser) {
    browser
        .run(
            "window.__violations = []; document.addEventListener('securitypolicyviolation', \
             (event) => window.__violations.push(event.violatedDirective + ' ' + event.blockedURI));",
            vec![],
        )
        .await;
}

pub(crate) async fn assert_no_violations(browser: &Browser) {
    let violations = browser.run("return window.__violations ?? [];", vec![]).await;
    assert_eq!(violations, json!([]), "the page broke its own policy");
}

/// Logs in through the form.
async fn log_in(browser: &Browser, user: &str, password: &str) {
    browser.wait_visible("#login-form").await;
    browser.type_into("#login-user", user).await;
    browser.type_into("#login-password", password).await;
    browser.click("#login-submit").await;
}

/// Opens the plant folder at `path` through the Plant tab's tree, folder by folder.
async fn open_folder(browser: &Browser, path: &str) {
    browser.click("#tab-plant").await;
    let mut shown = String::new();
    for part in path.split('/') {
        shown = if shown.is_empty() {
            part.to_owned()
        } else {
            format!("{shown}/{part}")
        };
        let label = format!(".tree-label[data-path=\"{shown}\"]");
        browser.wait_visible(&label).await;
        browser.click(&label).await;
        browser
            .wait_text("#folder-title", "the folder opens", |title| title == shown)
            .await;
    }
}

/// The shown value of a tag's row.
/// Asserts that no element inside `css` reaches past the right edge of the screen, nor is cut
/// by its own box (text wider than the element that holds it); text only screen readers get
/// is left out.
pub(crate) async fn assert_within_the_screen(browser: &Browser, css: &str) {
    let overflowing = browser
        .run(
            "const root = document.querySelector(arguments[0]);\
             return [root, ...root.querySelectorAll('*')].filter((node) => {\
               const box = node.getBoundingClientRect();\
               return box.width > 0 && !node.closest('.visually-hidden') && (box.right > window.innerWidth + 0.5 || node.scrollWidth > node.clientWidth + 1 && getComputedStyle(node).overflowX !== 'auto');\
             }).map((node) => `${node.tagName.toLowerCase()}#${node.id}.${node.className?.baseVal ?? node.className}`);",
            vec![json!(css)],
        )
        .await;
    assert_eq!(overflowing, json!([]), "{css} fits the screen");
}

fn value_cell(tag: &str) -> String {
    format!("#tag-rows tr[data-tag=\"{tag}\"] .value")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_under_a_strict_policy_and_opens_on_the_login_form() {
    let rig = PanelRig::start(Solution::demo()).await;
    let http = reqwest::Client::new();
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/panel/panel.css", "text/css; charset=utf-8"),
        ("/panel/js/main.js", "text/javascript; charset=utf-8"),
        ("/panel/js/connection.js", "text/javascript; charset=utf-8"),
        ("/panel/js/proposals.js", "text/javascript; charset=utf-8"),
        ("/panel/favicon.svg", "image/svg+xml"),
        ("/panel/no-such.js", "text/plain; charset=utf-8"),
    ] {
        let response = http.get(rig.url(path)).send().await.expect("answers");
        let expected = if path.contains("no-such") { 404 } else { 200 };
        assert_eq!(response.status().as_u16(), expected, "{path}");
        let headers = response.headers();
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("")
        };
        assert_eq!(header("content-type"), content_type, "{path}");
        assert_eq!(header("content-security-policy"), POLICY, "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "no-referrer", "{path}");
        if expected == 200 {
            assert_eq!(header("cache-control"), "no-cache", "{path}");
            let etag = header("etag").to_owned();
            let again = http
                .get(rig.url(path))
                .header("if-none-match", &etag)
                .send()
                .await
                .expect("answers");
            assert_eq!(again.status().as_u16(), 304, "{path} revalidates by its ETag");
        }
    }
    let page = http
        .get(rig.url("/"))
        .send()
        .await
        .expect("answers")
        .text()
        .await
        .expect("a page");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing from the internet"
    );

    let driver = Chromedriver::start();
    let browser = driver.browser(PANEL_PC.0, PANEL_PC.1).await;
    browser.open(&rig.url("/")).await;
    browser.wait_visible("#login-form").await;
    // The script ran (it shows the form) and the stylesheet applied, under the policy.
    let background = browser
        .run("return getComputedStyle(document.body).backgroundColor;", vec![])
        .await;
    assert_eq!(background, json!("rgb(212, 214, 217)"));
    let inline = browser
        .run(
            "return document.querySelectorAll('script:not([src]), [style]').length;",
            vec![],
        )
        .await;
    assert_eq!(inline, json!(0));
    browser.screenshot("login").await;
    browser.assert_accessible("the login form").await;
    browser.resize(PHONE.0, PHONE.1).await;
    browser.wait_visible("#login-form").await;
    browser.screenshot("login-phone").await;
    browser.assert_accessible("the login form on a phone").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_logs_in_watches_acts_asks_and_rides_out_a_server_restart() {
    let solution = solution_with_writable_tags();
    add_user(&solution, "operator", "op-pass-1", "operator");
    let mut rig = PanelRig::start(solution).await;
    let driver = Chromedriver::start();
    let browser = driver.browser(PANEL_PC.0, PANEL_PC.1).await;
    browser.open(&rig.url("/")).await;
    watch_policy(&browser).await;

    // A wrong password is refused with the server's words.
    log_in(&browser, "operator", "wrong").await;
    browser
        .wait_text("#login-error", "the refusal", |text| {
            text.contains("unknown user or wrong password")
        })
        .await;
    browser.screenshot("login-refused").await;
    log_in(&browser, "operator", "op-pass-1").await;
    browser.wait_visible("#app").await;
    browser
        .wait_text("#who-name", "who is logged in", |name| name == "operator")
        .await;
    browser
        .wait_text("#link-state", "the connection", |state| state == "Connected")
        .await;

    // Live values: a change made elsewhere shows at once.
    open_folder(&browser, "Plant/Area1/Pump1").await;
    browser
        .wait_text(&value_cell("Pump1.MotorCurrent"), "Pump 1's current", |text| {
            text == "12.4 A"
        })
        .await;
    let guest = rig.guest().await;
    write(&guest, "Pump1.StartCount", WriteValue::Integer(1300)).await;
    browser
        .wait_text(&value_cell("Pump1.StartCount"), "the new start count", |text| {
            text == "1300"
        })
        .await;
    browser.screenshot("plant").await;
    browser.assert_accessible("the plant").await;
    // The tree from the keyboard alone: Down to the next folder shown, Enter shows it, Left
    // back to its parent, Left again closes the parent.
    let focused = || async {
        browser
            .run("return document.activeElement.dataset.path ?? null;", vec![])
            .await
    };
    browser
        .run(
            "document.querySelector('.tree-label[data-path=\"Plant/Area1/Pump1\"]').focus();",
            vec![],
        )
        .await;
    browser.keys(&fantoccini::key::Key::Down.to_string()).await;
    assert_eq!(focused().await, json!("Plant/Area1/Pump1/Motor1"));
    browser.keys(&fantoccini::key::Key::Enter.to_string()).await;
    browser
        .wait_text("#folder-title", "the folder chosen by keyboard", |title| {
            title == "Plant/Area1/Pump1/Motor1"
        })
        .await;
    browser.keys(&fantoccini::key::Key::Left.to_string()).await;
    assert_eq!(focused().await, json!("Plant/Area1/Pump1"));
    browser.keys(&fantoccini::key::Key::Left.to_string()).await;
    assert_eq!(
        count(&browser, ".tree-label[data-path=\"Plant/Area1/Pump1/Motor1\"]").await,
        json!(0),
        "Left closes an open folder"
    );
    browser.keys(&fantoccini::key::Key::Right.to_string()).await;
    open_folder(&browser, "Plant/Area1/Pump1").await;

    // A write with its confirmation naming tag, old and new value, then the outcome.
    open_folder(&browser, "Plant/Area1/Tank1").await;
    browser
        .click("tr[data-tag=\"Tank1.Level\"] .actions button:last-child")
        .await;
    browser.wait_visible("#write-dialog").await;
    browser.type_into("#write-input", "140").await;
    browser.click("#write-next").await;
    browser
        .wait_text("#write-error", "the range check", |text| {
            text.contains("above the maximum 100")
        })
        .await;
    browser.type_into("#write-input", "90").await;
    browser.click("#write-next").await;
    let confirmation = browser
        .wait_text("#write-confirm-text", "the confirmation", |text| !text.is_empty())
        .await;
    assert_eq!(confirmation, "Change Plant/Area1/Tank1/Level from 62 % to 90 %?");
    browser.screenshot("write-confirm").await;
    browser.assert_accessible("the write dialog's confirmation").await;
    browser.click("#write-next").await;
    browser
        .wait_text("#write-outcome", "the outcome", |text| text == "Written.")
        .await;
    browser.click("#write-cancel").await;
    browser
        .wait_text(&value_cell("Tank1.Level"), "the written level", |text| {
            text == "90 %"
        })
        .await;

    // A text tag with a set of values is written by choosing one; choosing the value it has
    // already says so instead of asking to change Auto to Auto.
    open_folder(&browser, "Plant/Area1/Pump1").await;
    browser
        .click("tr[data-tag=\"Pump1.Mode\"] .actions button:last-child")
        .await;
    browser.wait_visible("#write-dialog").await;
    let choices = browser
        .run(
            "return [...document.querySelectorAll('#write-input option')].map((option) => option.value);",
            vec![],
        )
        .await;
    assert_eq!(choices, serde_json::json!(["Auto", "Manual", "Off"]));
    let choose = "const input = document.getElementById('write-input'); input.value = arguments[0]; \
                  input.dispatchEvent(new Event('input'));";
    browser.run(choose, vec![serde_json::json!("Auto")]).await;
    browser.click("#write-next").await;
    browser
        .wait_text("#write-error", "the no-change notice", |text| {
            text == "Plant/Area1/Pump1/Mode is Auto already: nothing to change."
        })
        .await;
    browser.run(choose, vec![serde_json::json!("Manual")]).await;
    browser.click("#write-next").await;
    let confirmation = browser
        .wait_text("#write-confirm-text", "the confirmation", |text| !text.is_empty())
        .await;
    assert_eq!(confirmation, "Change Plant/Area1/Pump1/Mode from Auto to Manual?");
    browser.click("#write-next").await;
    browser
        .wait_text("#write-outcome", "the outcome", |text| text == "Written.")
        .await;
    browser.click("#write-cancel").await;
    open_folder(&browser, "Plant/Area1/Tank1").await;

    // The write raised Tank 1's high alarm: the banner shows it, unacknowledged.
    browser
        .wait_text("#alarm-count", "the banner", |text| {
            text.contains("1 active alarm") && text.contains("1 unacknowledged")
        })
        .await;

    // A trend over a chosen window, and its CSV.
    browser
        .click("tr[data-tag=\"Tank1.Level\"] .actions button:first-child")
        .await;
    browser.wait_visible("#trend-chart svg polyline").await;
    browser.click("#trend-windows [data-window=\"28800000\"]").await;
    browser
        .wait_text("#trend-status", "the 8 h window", |text| {
            text.ends_with("samples") || text.contains(" samples, drawn from ")
        })
        .await;
    browser.wait_visible("#trend-chart svg polyline").await;
    browser.click("#trend-csv").await;
    let csv = String::from_utf8(browser.downloaded("Tank1.Level.csv").await).expect("a text file");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("timestamp,tag,value,quality"));
    let last = lines.last().expect("samples");
    assert!(
        last.ends_with(",Tank1.Level,90,Good"),
        "the written value is the last sample: {last}"
    );
    // Its alarms' limits drawn and named, on an axis of round ticks evenly apart.
    let limits = browser
        .run(
            "return [...document.querySelectorAll('#trend-chart text.limit-label')].map((text) => text.textContent);",
            vec![],
        )
        .await;
    assert_eq!(limits, json!(["Hi 85", "LoLo 10"]));
    let ticks: Vec<f64> = browser
        .run(
            "return [...document.querySelectorAll('#trend-chart text.tick')].map((text) => text.textContent);",
            vec![],
        )
        .await
        .as_array()
        .expect("tick labels")
        .iter()
        .map(|label| label.as_str().and_then(|label| label.parse().ok()).expect("a number"))
        .collect();
    let step = ticks[1] - ticks[0];
    let power = 10_f64.powf(step.log10().floor());
    assert!(
        [1.0, 2.0, 5.0].contains(&(step / power).round())
            && ticks
                .windows(2)
                .all(|pair| ((pair[1] - pair[0]) - step).abs() < 1e-9)
            && ticks
                .iter()
                .all(|tick| (tick / step - (tick / step).round()).abs() < 1e-9)
            && ticks[0] <= 10.0
            && ticks[ticks.len() - 1] >= 90.0,
        "round ticks 1, 2 or 5 times a power of ten apart, over the limits and the value: {ticks:?}"
    );
    // The cursor, from the keyboard: End reads the last sample, a step left an earlier one.
    let key = |key: &str| {
        format!(
            "const chart = document.querySelector('#trend-chart svg'); chart.focus();\
             chart.dispatchEvent(new KeyboardEvent('keydown', {{ key: '{key}', bubbles: true }}));"
        )
    };
    browser.run(&key("End"), vec![]).await;
    let last_read = text_of(&browser, "#trend-cursor".to_owned()).await;
    assert!(
        last_read.ends_with(": 90 %"),
        "the written value, with its time: {last_read}"
    );
    browser.run(&key("ArrowLeft"), vec![]).await;
    let earlier = text_of(&browser, "#trend-cursor".to_owned()).await;
    assert!(earlier != last_read && earlier.ends_with(" %"), "{earlier}");
    assert_eq!(
        browser
            .run(
                "return document.querySelector('#trend-chart svg .cursor').getAttribute('visibility');",
                vec![]
            )
            .await,
        json!("visible")
    );
    browser.screenshot("trend").await;

    // Several pens, each on its own scale: the cursor reads each at one time.
    browser
        .run(
            "const add = document.getElementById('trend-add'); add.value = 'Pump1.FlowRate';\
             add.dispatchEvent(new Event('change'));",
            vec![],
        )
        .await;
    browser
        .wait_until("a second pen", || async {
            count(&browser, "#trend-chart svg polyline.pen-1").await == json!(1)
                && count(&browser, "#trend-pens li").await == json!(2)
        })
        .await;
    browser.run(&key("End"), vec![]).await;
    let both = text_of(&browser, "#trend-cursor".to_owned()).await;
    assert!(
        both.contains(": Tank1.Level 90 %, Pump1.FlowRate 84 m3/h"),
        "every pen read at one time: {both}"
    );
    browser.screenshot("trend-pens").await;
    browser.assert_accessible("a trend of two pens").await;
    // Zoom and pan from the keyboard: zoomed about now it stays live; panned back it is not,
    // and Live returns.
    let pressed = |id: &'static str| {
        let browser = &browser;
        async move {
            browser
                .run(
                    &format!("return document.getElementById('{id}').getAttribute('aria-pressed');"),
                    vec![],
                )
                .await
        }
    };
    browser.run(&key("+"), vec![]).await;
    browser
        .wait_text("#trend-title", "the trend again", |title| {
            title == "Trend: 2 tags"
        })
        .await;
    assert_eq!(
        pressed("trend-live").await,
        json!("true"),
        "zoomed in about now, still live"
    );
    browser
        .run(
            "const chart = document.querySelector('#trend-chart svg'); chart.focus();\
             chart.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowLeft', shiftKey: true, bubbles: true }));",
            vec![],
        )
        .await;
    browser
        .wait_until("panned back", || async {
            pressed("trend-live").await == json!("false")
        })
        .await;
    browser.click("#trend-live").await;
    browser
        .wait_until("live again", || async {
            pressed("trend-live").await == json!("true")
        })
        .await;
    browser
        .click("#trend-pens li:last-child button[data-remove]")
        .await;
    browser
        .wait_until("one pen again", || async {
            count(&browser, "#trend-pens li").await == json!(1)
        })
        .await;

    // The alarm list: acknowledge as an operator.
    browser.click("#tab-alarms").await;
    let row = "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"]";
    browser.wait_visible(&format!("{row} button[data-alarm]")).await;
    browser.screenshot("alarms").await;
    browser.assert_accessible("the alarms").await;
    browser.click(&format!("{row} button[data-alarm]")).await;
    browser
        .wait_text(&format!("{row} .state"), "the acknowledgement", |text| {
            text.contains("Active, acknowledged")
        })
        .await;
    browser
        .wait_text("#history-rows", "the alarm history", |text| {
            text.contains("Tank1.Level.Hi")
        })
        .await;
    browser.screenshot("alarms-acknowledged").await;

    // The assistant: questions drawn from this plant to start with, the streamed answer
    // rendered from its Markdown, and its tool trace collapsed.
    browser.click("#tab-assistant").await;
    let examples = browser
        .run(
            "return [...document.querySelectorAll('#ask-examples .example')].map((b) => b.textContent);",
            vec![],
        )
        .await;
    assert!(
        examples
            .as_array()
            .is_some_and(|examples| examples.contains(&json!("What is wrong with Pump1?"))),
        "{examples}"
    );
    browser
        .type_into("#ask-input", "What is wrong with Pump 1?")
        .await;
    browser.click("#ask-send").await;
    browser.wait_visible(".transcript .ai[data-status=\"ok\"]").await;
    let answer = browser
        .text(".transcript .ai .answer-text.rendered")
        .await
        .unwrap_or_default();
    assert!(answer.contains("Pump1"), "{answer}");
    assert_eq!(
        browser
            .run(
                "return document.querySelector('.transcript .ai .trace').open;",
                vec![]
            )
            .await,
        json!(false),
        "the tool trace starts collapsed"
    );
    assert_eq!(
        browser.text(".transcript .ai .trace summary").await.as_deref(),
        Some("3 tool calls: runtime_search_uns, runtime_get_active_alarms, runtime_search_documents")
    );
    let tools = browser
        .run(
            "return [...document.querySelectorAll('.transcript .ai .tool')].map((tool) => [tool.dataset.tool, tool.dataset.state]);",
            vec![],
        )
        .await;
    assert_eq!(
        tools,
        json!([
            ["runtime_search_uns", "ok"],
            ["runtime_get_active_alarms", "ok"],
            ["runtime_search_documents", "ok"]
        ])
    );
    // The answer's sources: the procedure passage it quotes, with where it is from.
    browser
        .wait_text(".transcript .ai .sources", "the cited procedure", |text| {
            text.contains("Pump 1 high motor current")
                && text.contains("procedures/pump-high-motor-current.md, lines")
        })
        .await;
    // The citation in the answer opens its passage, its lines numbered and marked.
    browser.click(".transcript .ai .answer-text a.cite").await;
    browser
        .wait_visible(".transcript .ai .sources details.source.cited[open] .passage-lines")
        .await;
    browser.screenshot("assistant").await;
    browser.assert_accessible("the assistant's answer").await;
    browser.click(".transcript .ai .trace summary").await;
    browser.click(".transcript .ai .tool summary").await;
    browser
        .wait_visible(".transcript .ai .tool details[open] pre")
        .await;
    browser.screenshot("assistant-tool").await;

    // Cancel a turn.
    browser.type_into("#ask-input", SLOW_QUESTION).await;
    browser.click("#ask-send").await;
    browser.wait_visible("#ask-cancel").await;
    browser.click("#ask-cancel").await;
    browser
        .wait_visible(".transcript .ai[data-status=\"truncated\"]")
        .await;
    let cancelled = browser
        .text(".transcript .ai[data-status=\"truncated\"] .answer-footer")
        .await
        .unwrap_or_default();
    assert!(cancelled.to_lowercase().contains("cancel"), "{cancelled}");
    browser.screenshot("assistant-cancelled").await;

    // Clear the conversation.
    browser.click("#chat-clear").await;
    browser
        .wait_text("#transcript", "the cleared transcript", |text| {
            text.contains("Conversation cleared")
        })
        .await;

    // A reload keeps the session: no login form.
    browser.client.refresh().await.expect("reloads");
    browser.wait_visible("#app").await;
    browser
        .wait_text("#who-name", "who is logged in", |name| name == "operator")
        .await;
    assert_eq!(
        browser
            .run("return document.getElementById('login').hidden;", vec![])
            .await,
        json!(true)
    );
    watch_policy(&browser).await;

    // The server is lost: the page says so; back, it recovers and values are live again.
    browser
        .wait_text("#link-state", "the connection", |state| state == "Connected")
        .await;
    open_folder(&browser, "Plant/Area1/Pump1").await;
    rig.kill();
    banner_reads(&browser, "Connection lost, reconnecting").await;
    // No value shown without a connection reads as Good.
    browser
        .wait_text(
            "tr[data-tag=\"Pump1.StartCount\"] .quality",
            "the stale quality",
            |text| text == "Stale (was Good)",
        )
        .await;
    browser.screenshot("connection-lost").await;
    rig.restart();
    banner_reads(&browser, "Connection restored").await;
    // Back on the folder it showed, subscribed again by itself.
    let guest = rig.guest().await;
    write(&guest, "Pump1.StartCount", WriteValue::Integer(1400)).await;
    browser
        .wait_text(
            &value_cell("Pump1.StartCount"),
            "a value after the restart",
            |text| text == "1400",
        )
        .await;
    browser.screenshot("recovered").await;
    browser.resize(1280, 800).await;
    browser.wait_visible(&value_cell("Pump1.StartCount")).await;
    browser.screenshot("plant-1280x800").await;
    assert_within_the_screen(&browser, "#app").await;

    browser.resize(PHONE.0, PHONE.1).await;
    browser.wait_visible(&value_cell("Pump1.StartCount")).await;
    browser.screenshot("plant-phone").await;
    browser.assert_accessible("the plant on a phone").await;
    // On a phone too, nothing of a trend or a write dialog runs off the screen.
    browser
        .click("tr[data-tag=\"Pump1.MotorCurrent\"] .actions button:first-child")
        .await;
    browser.wait_visible("#trend-chart svg polyline").await;
    browser
        .run("document.getElementById('trend').scrollIntoView();", vec![])
        .await;
    browser.screenshot("trend-phone").await;
    assert_within_the_screen(&browser, "#trend").await;
    let overlapping = browser
        .run(
            "const boxes = [...document.querySelectorAll('#trend-chart text.axis')]\
               .map((text) => text.getBoundingClientRect());\
             return boxes.flatMap((a, i) => boxes.slice(i + 1).filter((b) =>\
               a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)).length;",
            vec![],
        )
        .await;
    assert_eq!(overlapping, json!(0), "the trend's axis labels overlap");
    browser.click("#trend-close").await;
    browser
        .click("tr[data-tag=\"Pump1.StartCount\"] .actions button:last-child")
        .await;
    browser.wait_visible("#write-dialog").await;
    browser.screenshot("write-phone").await;
    browser.assert_accessible("the write dialog on a phone").await;
    assert_within_the_screen(&browser, "#write-dialog").await;
    browser.click("#write-cancel").await;
    browser.click("#tab-alarms").await;
    browser.screenshot("alarms-phone").await;
    browser.assert_accessible("the alarms on a phone").await;
    assert_no_violations(&browser).await;

    // Logging out ends the session: a reload asks for the password again.
    browser.click("#logout").await;
    browser.wait_visible("#login-form").await;
    browser.client.refresh().await.expect("reloads");
    browser.wait_visible("#login-form").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_the_alarms_but_is_refused_acknowledging_with_the_servers_reason() {
    let solution = solution_with_writable_tags();
    add_user(&solution, "watcher", "view-pass-1", "viewer");
    let rig = PanelRig::start(solution).await;
    let guest = rig.guest().await;
    write(&guest, "Tank1.Level", WriteValue::Number(92.0)).await;
    let driver = Chromedriver::start();
    let browser = driver.browser(PANEL_PC.0, PANEL_PC.1).await;
    browser.open(&rig.url("/")).await;
    log_in(&browser, "watcher", "view-pass-1").await;
    browser
        .wait_text("#who-role", "the role", |role| role == "viewer role")
        .await;
    // By keyboard: the tabs answer the arrow keys, and focus is shown.
    browser
        .run("document.getElementById('tab-plant').focus();", vec![])
        .await;
    browser.keys(&fantoccini::key::Key::Right.to_string()).await;
    browser
        .wait_text(".tabs [aria-selected=\"true\"]", "the next tab", |tab| {
            tab == "Alarms"
        })
        .await;
    let button = "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"] button[data-alarm]";
    browser.wait_visible(button).await;
    // What to do about it, and how soon, under the alarm's message.
    let guide = "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"] .a-guide";
    assert_eq!(
        text_of(&browser, format!("{guide} .g-response")).await,
        "Confirm Pump 1 is running; start Pump 2 or reduce the inflow"
    );
    assert_eq!(text_of(&browser, format!("{guide} .g-within")).await, "10 min");
    assert_eq!(
        text_of(&browser, format!("{guide} .g-cause")).await,
        "Inflow above what Pump 1 draws, or Pump 1 stopped"
    );
    assert_eq!(
        text_of(&browser, format!("{guide} .g-consequence")).await,
        "Tank 1 overflows into the bund"
    );
    browser.screenshot("alarms-guidance").await;
    browser.assert_accessible("an alarm's guidance").await;
    browser.keys(&fantoccini::key::Key::Tab.to_string()).await;
    assert_eq!(
        browser
            .run("return document.activeElement.matches(':focus-visible') && document.activeElement.dataset.alarm;", vec![])
            .await,
        json!("Tank1.Level.Hi"),
        "Tab reaches the Acknowledge button, its focus shown"
    );
    browser.screenshot("keyboard-focus").await;
    browser.wait_visible(button).await;
    refused_to_a_viewer(&browser, button, "#alarm-error", "Not acknowledged: ").await;
    browser.screenshot("alarms-viewer-refused").await;
    assert_eq!(
        browser
            .run(
                "return [...document.querySelectorAll('.strip-item.unacked')].length;",
                vec![]
            )
            .await,
        Value::from(1),
        "still unacknowledged in the banner"
    );
    browser.resize(PHONE.0, PHONE.1).await;
    browser.wait_visible(guide).await;
    browser.screenshot("alarms-guidance-phone").await;
    // The level falls back: the alarm is cleared but not acknowledged, which is not active.
    write(&guest, "Tank1.Level", WriteValue::Number(50.0)).await;
    browser
        .wait_text("#alarm-count", "the cleared alarm", |text| {
            text == "No active alarms, 1 cleared to acknowledge"
        })
        .await;
    browser.screenshot("alarms-cleared-phone").await;
    // With the assistant switched off, someone who is not an administrator is told who can
    // turn it on, not a command to run on the server.
    let path = rig.solution.path.to_str().expect("utf-8").to_owned();
    admin(&["settings", &path, "set", "ModelEnabled", "false"], "");
    browser.click("#tab-assistant").await;
    browser.type_into("#ask-input", "Anything wrong?").await;
    browser.click("#ask-send").await;
    let off = ".transcript .ai[data-status=\"disabled\"] .warnings";
    let said = browser
        .wait_text(off, "the disabled answer", |text| !text.is_empty())
        .await;
    assert_eq!(
        said,
        "The assistant is switched off on this server; an administrator can turn it on."
    );
    browser.screenshot("assistant-disabled-phone").await;
    assert_within_the_screen(&browser, "#view-assistant").await;
    browser.assert_accessible("the assistant on a phone").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_field_bound_tag_is_sent_to_the_field_then_shows_what_the_field_reports() {
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        bind(
            model,
            "Tank1.Level",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                ..plant_model::SourceBinding::default()
            },
        );
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                tag.writable = true;
            }
        }
    });
    let rig = PanelRig::start(solution).await;
    let level = format!("{ROOT}/Plant/Area1/Tank1/Level");
    let mut field = Publisher::connect(broker.port).await;
    field.subscribe(&format!("{level}/set")).await;
    // Retained, as a field device's last value is: the server's source may subscribe after
    // this is sent, and must still see it.
    field.publish(&level, "50", true).await;

    let driver = Chromedriver::start();
    let browser = driver.browser(PANEL_PC.0, PANEL_PC.1).await;
    browser.open(&rig.url("/")).await;
    // The demo's guest is a passwordless operator.
    log_in(&browser, "guest", "").await;
    open_folder(&browser, "Plant/Area1/Tank1").await;
    browser
        .wait_text(&value_cell("Tank1.Level"), "the field's level", |text| {
            text == "50 %"
        })
        .await;
    browser
        .click("tr[data-tag=\"Tank1.Level\"] .actions button:last-child")
        .await;
    browser.type_into("#write-input", "70.5").await;
    browser.click("#write-next").await;
    browser.click("#write-next").await;
    browser
        .wait_text("#write-outcome", "the outcome", |text| {
            text.starts_with("Sent to the field;")
        })
        .await;
    browser.screenshot("write-sent-to-field").await;
    let (_, payload) = field.next().await;
    assert_eq!(payload, b"70.5");
    // The field takes the command and reports it back as its value.
    field.publish(&level, payload, false).await;
    browser
        .wait_text("#write-outcome", "the field's report", |text| {
            text == "Sent to the field; the field now reports 70.5 %."
        })
        .await;
    browser.screenshot("write-field-reported").await;
    browser.close().await;
}

/// Pump 1's mode as a client reads it.
async fn mode_of(client: &Client) -> Option<WireValue> {
    let readings = client.read_tags(&["Pump1.Mode"]).await.expect("read");
    readings[0].value.clone()
}

/// The text of the first element matching `css` (empty without one).
async fn text_of(browser: &Browser, css: String) -> String {
    browser.text(&css).await.unwrap_or_default()
}

/// The number of elements matching `css` that are displayed.
async fn count(browser: &Browser, css: &str) -> Value {
    browser
        .run(
            "return [...document.querySelectorAll(arguments[0])].filter((node) => node.checkVisibility()).length;",
            vec![json!(css)],
        )
        .await
}

/// Waits until the connection banner starts with `words`.
async fn banner_reads(browser: &Browser, words: &str) {
    browser
        .wait_text("#connection-banner", words, |text| text.starts_with(words))
        .await;
}

/// Clicks `button` as a viewer: `error` shows the server's refusal, naming the role, after
/// `words`.
async fn refused_to_a_viewer(browser: &Browser, button: &str, error: &str, words: &str) {
    browser.click(button).await;
    let refusal = browser
        .wait_text(error, "the refusal", |text| !text.is_empty())
        .await;
    assert!(
        refusal.starts_with(words) && refusal.contains("viewer"),
        "{refusal}"
    );
}

/// A browser on the panel of `rig`, its policy watched, logged in as `user` and connected.
/// The panel of `solution` with Tank 1's high alarm tripped, open on the alarms of the operator
/// `ops` (password `ops-pw`, added here).
async fn tank1_high_in_the_alarms_of_ops(solution: Solution) -> (PanelRig, Chromedriver, Browser) {
    add_user(&solution, "ops", "ops-pw", "operator");
    let rig = PanelRig::start(solution).await;
    let guest = rig.guest().await;
    write(&guest, "Tank1.Level", WriteValue::Number(92.0)).await;
    let (driver, browser) = logged_in(&rig, "ops", "ops-pw").await;
    browser.click("#tab-alarms").await;
    (rig, driver, browser)
}

pub(crate) async fn logged_in(rig: &PanelRig, user: &str, password: &str) -> (Chromedriver, Browser) {
    let driver = Chromedriver::start();
    let browser = driver.browser(PANEL_PC.0, PANEL_PC.1).await;
    browser.open(&rig.url("/")).await;
    watch_policy(&browser).await;
    log_in(&browser, user, password).await;
    browser
        .wait_text("#link-state", "the connection", |state| state == "Connected")
        .await;
    (driver, browser)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_approves_the_assistants_proposal_and_declines_another_from_the_pending_list() {
    let rig = PanelRig::start(proposable_solution()).await;
    let path = rig.solution.path.to_str().expect("utf-8 path").to_owned();
    let (_driver, browser) = logged_in(&rig, "guest", "").await;

    // The assistant proposes; its answer carries the proposal as a card, once.
    browser.click("#tab-assistant").await;
    browser.type_into("#ask-input", PROPOSE_QUESTION).await;
    browser.click("#ask-send").await;
    browser.wait_visible(".transcript .ai[data-status=\"ok\"]").await;
    let card = ".transcript .ai .proposal";
    assert_eq!(
        count(&browser, card).await,
        json!(1),
        "streamed and in the reply, shown once"
    );
    let shown = |part: &str| text_of(&browser, format!("{card} {part}"));
    assert_eq!(shown(".proposal-what").await, "Write “Manual” to Pump1.Mode");
    assert_eq!(shown(".proposal-was").await, "It was “Auto” when proposed.");
    assert_eq!(
        shown(".proposal-reason").await,
        "Reason: the level is high; run the pump by hand"
    );
    assert_eq!(
        shown(".proposal-by").await,
        "the assistant (turn 1, asked by guest)"
    );
    assert!(
        shown(".proposal-expires").await.ends_with(" unless decided"),
        "{}",
        shown(".proposal-expires").await
    );
    let guest = rig.guest().await;
    assert_eq!(
        mode_of(&guest).await,
        Some(WireValue::Text("Auto".into())),
        "proposing wrote nothing"
    );
    browser.screenshot("proposal-card").await;

    // Approved: the card says what became of it, and the pump is in Manual.
    browser.click(&format!("{card} [data-decide=\"approve\"]")).await;
    browser
        .wait_text(&format!("{card} .proposal-outcome"), "the outcome", |text| {
            text == "Approved by guest: written"
        })
        .await;
    assert_eq!(mode_of(&guest).await, Some(WireValue::Text("Manual".into())));
    assert_eq!(
        count(&browser, &format!("{card} button")).await,
        json!(0),
        "decided: nothing left to press"
    );
    browser.screenshot("proposal-approved").await;

    // Another client proposes: the pending list shows it without a reload.
    browser.click("#tab-proposals").await;
    browser.wait_visible("#proposal-none").await;
    let elsewhere = rig.guest().await;
    let id = propose_by_call(&elsewhere, "Off", "the pump is not needed overnight").await;
    let item = format!("#proposal-list .proposal[data-proposal=\"{id}\"]");
    browser.wait_visible(&item).await;
    browser
        .wait_text("#proposal-count-number", "the badge", |text| text == "1")
        .await;
    let proposer = guest.list_proposals().await.expect("lists").proposals[0]
        .proposer
        .clone();
    assert_eq!(
        browser.text(&format!("{item} .proposal-by")).await.as_deref(),
        Some(proposer.as_str())
    );
    assert_eq!(
        browser.text(&format!("{item} .proposal-what")).await.as_deref(),
        Some("Write “Off” to Pump1.Mode")
    );
    browser.screenshot("proposals-pending").await;
    browser.assert_accessible("the pending proposals").await;
    browser.resize(PHONE.0, PHONE.1).await;
    browser.wait_visible(&item).await;
    browser.screenshot("proposals-pending-phone").await;
    assert_within_the_screen(&browser, "#view-proposals").await;
    browser
        .assert_accessible("the pending proposals on a phone")
        .await;
    browser.resize(PANEL_PC.0, PANEL_PC.1).await;

    // Declined with a comment: it leaves the list, the audit has the decline.
    browser
        .click(&format!("{item} [data-decide=\"decline-open\"]"))
        .await;
    browser.wait_visible(&format!("{item} .proposal-comment")).await;
    assert_eq!(
        browser
            .run(
                "return document.activeElement.matches('.proposal-comment') && document.activeElement.labels[0].textContent;",
                vec![]
            )
            .await,
        json!("Why decline? (optional; the proposer is told)"),
        "the comment field, labelled, takes the focus"
    );
    browser
        .type_into(&format!("{item} .proposal-comment"), "keep it running tonight")
        .await;
    browser.screenshot("proposal-decline").await;
    browser.assert_accessible("declining a proposal").await;
    browser.click(&format!("{item} [data-decide=\"decline\"]")).await;
    browser.wait_visible("#proposal-none").await;
    let status = browser
        .wait_text("#proposal-status", "the decision", |text| !text.is_empty())
        .await;
    assert_eq!(
        status,
        "Write “Off” to Pump1.Mode: declined by guest: \"keep it running tonight\""
    );
    assert_eq!(count(&browser, "#proposal-list .proposal").await, json!(0));
    assert_eq!(
        browser
            .run("return document.getElementById('proposal-count').hidden;", vec![])
            .await,
        json!(true)
    );
    assert!(guest.list_proposals().await.expect("lists").proposals.is_empty());
    assert_eq!(mode_of(&guest).await, Some(WireValue::Text("Manual".into())));
    browser.screenshot("proposal-declined").await;
    let audit = admin(&["audit", &path], "");
    assert!(
        audit
            .lines()
            .any(|line| line.contains(" write Pump1.Mode by guest")
                && line.contains(&format!("declined {id}, proposed by "))
                && line.ends_with(": \"keep it running tonight\"")),
        "{audit}"
    );
    assert_no_violations(&browser).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_the_pending_proposals_is_refused_approving_and_watches_again_after_a_restart() {
    let mut rig = PanelRig::start(proposable_solution()).await;
    let elsewhere = rig.guest().await;
    let id = propose_by_call(&elsewhere, "Manual", "run it by hand").await;
    // `proposable_solution` adds the viewer `watcher`.
    let (_driver, browser) = logged_in(&rig, "watcher", "pw").await;
    browser
        .wait_text("#who-role", "the role", |role| role == "viewer role")
        .await;
    browser
        .wait_text("#proposal-count-number", "the badge", |text| text == "1")
        .await;
    browser.click("#tab-proposals").await;
    let item = format!("#proposal-list .proposal[data-proposal=\"{id}\"]");
    browser.wait_visible(&item).await;
    refused_to_a_viewer(
        &browser,
        &format!("{item} [data-decide=\"approve\"]"),
        &format!("{item} .proposal-error"),
        "Not approved: ",
    )
    .await;
    browser.screenshot("proposal-viewer-refused").await;
    // Still pending, still listed, its buttons there for someone who may decide.
    assert_eq!(
        elsewhere.list_proposals().await.expect("lists").proposals.len(),
        1
    );
    browser
        .wait_visible(&format!("{item} [data-decide=\"approve\"]"))
        .await;
    assert_eq!(mode_of(&elsewhere).await, Some(WireValue::Text("Auto".into())));

    // The server restarts (its proposals gone with it): back, the panel watches again.
    drop(elsewhere);
    rig.kill();
    banner_reads(&browser, "Connection lost, reconnecting").await;
    rig.restart();
    banner_reads(&browser, "Connection restored").await;
    // Listed again: the old proposal is gone; the next one can only come by the subscription.
    browser.wait_visible("#proposal-none").await;
    let again = rig.guest().await;
    let next = propose_by_call(&again, "Off", "proposed after the restart").await;
    browser
        .wait_visible(&format!("#proposal-list .proposal[data-proposal=\"{next}\"]"))
        .await;
    assert_eq!(count(&browser, "#proposal-list .proposal").await, json!(1));
    assert_no_violations(&browser).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witnessed_write_is_signed_in_the_dialog_by_the_operator_and_a_witness() {
    let solution = plant_with("mqtt://127.0.0.1:1", |model| {
        model.sources.clear();
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                (tag.writable, tag.signed, tag.witness, tag.simulate) = (true, true, true, None);
            }
        }
    });
    add_user(&solution, "ops", "ops-pw", "operator");
    add_user(&solution, "lead", "lead-pw", "operator");
    let rig = PanelRig::start(solution).await;
    let (_driver, browser) = logged_in(&rig, "ops", "ops-pw").await;
    open_folder(&browser, "Plant/Area1/Tank1").await;
    browser
        .click("tr[data-tag=\"Tank1.Level\"] .actions button:last-child")
        .await;
    browser.type_into("#write-input", "55").await;
    browser.click("#write-next").await;
    browser.click("#write-next").await;
    browser.wait_visible("#write-signature").await;
    browser
        .wait_text("#write-signature-why", "what the write takes", |text| {
            text == "Writing Tank1.Level takes two electronic signatures: yours and a witness's, another operator beside you. Each enters their password again."
        })
        .await;
    browser.wait_visible("#write-witness").await;
    browser.type_into("#write-sign-password", "ops-pw").await;
    browser.type_into("#write-witness-user", "lead").await;
    browser.type_into("#write-witness-password", "not-leads").await;
    browser.screenshot("write-signature").await;
    browser.assert_accessible("a signed write's dialog").await;
    browser.click("#write-next").await;
    browser
        .wait_text("#write-outcome", "the refusal", |text| {
            text == "Not written: the signature of lead is refused: unknown user or wrong password. Enter both passwords again."
        })
        .await;
    let emptied = browser
        .run(
            "return ['write-sign-password', 'write-witness-user', 'write-witness-password'].map((id) => document.getElementById(id).value);",
            vec![],
        )
        .await;
    assert_eq!(
        emptied,
        json!(["", "lead", ""]),
        "passwords leave the form once sent"
    );
    browser.screenshot("write-signature-refused").await;
    browser.type_into("#write-sign-password", "ops-pw").await;
    browser.type_into("#write-witness-password", "lead-pw").await;
    browser.click("#write-next").await;
    browser
        .wait_text("#write-outcome", "the outcome", |text| text == "Written.")
        .await;
    browser.screenshot("write-signed").await;
    assert_no_violations(&browser).await;
    browser.resize(PHONE.0, PHONE.1).await;
    browser.click("#write-cancel").await;
    browser
        .click("tr[data-tag=\"Tank1.Level\"] .actions button:last-child")
        .await;
    browser.type_into("#write-input", "56").await;
    browser.click("#write-next").await;
    browser.click("#write-next").await;
    browser.wait_visible("#write-witness").await;
    browser.screenshot("write-signature-phone").await;
    assert_within_the_screen(&browser, "#write-dialog").await;
    let trail = admin(&["audit", rig.solution.path.to_str().expect("utf-8")], "");
    assert!(
        trail.contains("refused: the signature of lead is refused") && trail.contains("55.0: ok"),
        "{trail}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_alarm_is_acknowledged_in_a_dialog_that_takes_the_operators_password() {
    let solution = plant_with("mqtt://127.0.0.1:1", |model| {
        model.sources.clear();
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                (tag.writable, tag.simulate) = (true, None);
            }
        }
        for alarm in &mut model.alarms {
            if alarm.name == "Tank1.Level.Hi" {
                alarm.signed = true;
            }
        }
    });
    let (rig, _driver, browser) = tank1_high_in_the_alarms_of_ops(solution).await;
    let button = "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"] button[data-alarm]";
    browser.wait_visible(button).await;
    browser.click(button).await;
    browser.wait_visible("#alarm-dialog").await;
    browser
        .wait_text("#alarm-signature-why", "what it takes", |text| {
            text == "Acknowledging Tank1.Level.Hi takes your electronic signature: enter your password again. It means you have seen the alarm and act on it."
        })
        .await;
    browser.type_into("#alarm-sign-password", "not-it").await;
    browser.click("#alarm-dialog-sign").await;
    browser
        .wait_text("#alarm-dialog-error", "the refusal", |text| {
            text == "Not acknowledged: the signature of ops is refused: unknown user or wrong password. Enter your password again."
        })
        .await;
    assert_eq!(
        browser
            .run(
                "return document.getElementById('alarm-sign-password').value;",
                vec![]
            )
            .await,
        json!(""),
        "the password leaves the form once sent"
    );
    browser.screenshot("alarm-signature-refused").await;
    browser.type_into("#alarm-sign-password", "ops-pw").await;
    browser.click("#alarm-dialog-sign").await;
    browser
        .wait_text(
            "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"] .state",
            "the acknowledgement",
            |text| text.contains("Active, acknowledged"),
        )
        .await;
    assert_eq!(
        browser
            .run("return document.getElementById('alarm-dialog').open;", vec![])
            .await,
        json!(false),
        "the dialog closes once signed"
    );
    browser.screenshot("alarm-signed").await;
    assert_no_violations(&browser).await;
    let trail = admin(&["audit", rig.solution.path.to_str().expect("utf-8")], "");
    assert!(
        trail.contains("refused: the signature of ops is refused")
            && trail.contains("signed by ops (performed"),
        "{trail}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_shelves_an_active_alarm_off_the_lists_and_unshelves_it_back() {
    let solution = solution_with_writable_tags();
    let (rig, _driver, browser) = tank1_high_in_the_alarms_of_ops(solution).await;
    let shelve = "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"] button[data-shelve]";
    browser.wait_visible(shelve).await;
    browser.click(shelve).await;
    browser.wait_visible("#alarm-shelve-fields").await;
    assert!(
        text_of(&browser, "#alarm-dialog-title".to_owned())
            .await
            .starts_with("Shelve Tank 1 level high"),
        "the dialog names the alarm as the operator reads it"
    );
    // A reason is required, said at once.
    browser.click("#alarm-dialog-sign").await;
    browser
        .wait_text("#alarm-dialog-error", "the missing reason", |text| {
            text == "Say why: the next shift reads it."
        })
        .await;
    browser
        .run(
            "document.getElementById('alarm-shelve-for').value = '120';",
            vec![],
        )
        .await;
    browser
        .type_into("#alarm-shelve-reason", "level transmitter being replaced")
        .await;
    browser.screenshot("alarm-shelve-dialog").await;
    browser.assert_accessible("the shelving dialog").await;
    browser.click("#alarm-dialog-sign").await;
    let handled = "#handled-rows tr[data-alarm=\"Tank1.Level.Hi\"]";
    browser.wait_visible(handled).await;
    let how = text_of(&browser, format!("{handled} .h-how")).await;
    assert!(how.starts_with("Shelved by ops until "), "{how}");
    assert_eq!(
        text_of(&browser, format!("{handled} .h-why")).await,
        "level transmitter being replaced"
    );
    assert_eq!(
        text_of(&browser, format!("{handled} .h-state")).await,
        "Active, unacknowledged",
        "still in alarm underneath"
    );
    browser
        .wait_text("#alarm-count", "the banner without it", |text| {
            text == "No active alarms"
        })
        .await;
    assert_eq!(
        count(&browser, "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"]").await,
        json!(0),
        "off the active list"
    );
    browser.screenshot("alarms-shelved").await;
    browser.assert_accessible("the shelved alarms").await;
    assert_no_violations(&browser).await;
    browser.resize(PHONE.0, PHONE.1).await;
    browser.wait_visible(handled).await;
    browser.screenshot("alarms-shelved-phone").await;
    assert_within_the_screen(&browser, "#handled-card").await;
    browser.click(&format!("{handled} button[data-unshelve]")).await;
    browser
        .wait_visible("#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"] button[data-alarm]")
        .await;
    assert!(
        browser
            .run("return document.getElementById('handled-card').hidden;", vec![])
            .await
            == json!(true),
        "nothing shelved any more"
    );
    let trail = admin(&["audit", rig.solution.path.to_str().expect("utf-8")], "");
    assert!(
        trail.contains("shelve Tank1.Level.Hi by ops") && trail.contains("unshelve Tank1.Level.Hi by ops"),
        "{trail}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_alarms_is_said_across_the_banner_with_its_first_out() {
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["settings", &path, "set", "AlarmFloodCount", "2"], "");
    let (rig, _driver, browser) = tank1_high_in_the_alarms_of_ops(solution).await;
    browser
        .wait_visible("#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"]")
        .await;
    assert!(
        browser
            .run("return document.getElementById('alarm-flood').hidden;", vec![])
            .await
            == json!(true),
        "one activation is no flood"
    );
    // Two more activations of it within 10 minutes: three, more than two.
    let guest = rig.guest().await;
    for level in [50.0, 93.0, 50.0, 94.0] {
        write(&guest, "Tank1.Level", WriteValue::Number(level)).await;
    }
    browser
        .wait_text("#alarm-flood", "the flood", |text| {
            text.starts_with("Alarm flood: 3 alarms in 10 minutes since ")
                && text.ends_with(". First out: Tank 1 level high (Tank1.Level.Hi).")
        })
        .await;
    // Tripping three times within a minute, it chatters, said beside its state.
    assert_eq!(
        text_of(
            &browser,
            "#alarm-rows tr[data-alarm=\"Tank1.Level.Hi\"] .chatter-badge".to_owned()
        )
        .await,
        "Chattering"
    );
    browser.screenshot("alarm-flood").await;
    assert_no_violations(&browser).await;

    // A stopped pump's low discharge pressure is suppressed by design: listed apart.
    write(&guest, "Pump1.Running", WriteValue::Boolean(false)).await;
    let suppressed = "#handled-rows tr[data-alarm=\"Pump1.DischargePressure.Lo\"]";
    browser.wait_visible(suppressed).await;
    let how = text_of(&browser, format!("{suppressed} .h-how")).await;
    assert!(how.starts_with("Suppressed by design since "), "{how}");
    assert_eq!(
        text_of(&browser, format!("{suppressed} .h-why")).await,
        "Pump1.Running == false"
    );
    browser.screenshot("alarm-suppressed").await;

    // The KPI page: the flood and the bad actor, from the alarm history.
    browser.click("#tab-kpis").await;
    browser
        .wait_text("#kpi-frequent tbody", "the frequent alarms", |text| {
            text.contains("Tank1.Level.Hi")
        })
        .await;
    // The demo's replayed history may flood a period of its own besides the one made here.
    let flood_tile = browser
        .run(
            "return [...document.querySelectorAll('.kpi-tile')].find((tile) => tile.textContent.startsWith('Time in flood')).textContent;",
            vec![],
        )
        .await;
    let flood_tile = flood_tile.as_str().expect("the tile's text");
    let periods: u32 = flood_tile
        .split(" %")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .expect("periods in flood");
    assert!(
        periods >= 1 && flood_tile.ends_with(" of 1008 periodsTarget: under 1 %"),
        "{flood_tile}"
    );
    let flood_bars = browser
        .run(
            "return document.querySelectorAll('#kpi-rate svg rect.bar.flood').length;",
            vec![],
        )
        .await;
    assert!(
        flood_bars
            .as_u64()
            .is_some_and(|bars| (1..=u64::from(periods)).contains(&bars)),
        "each period in flood drawn over the line: {flood_bars} for {periods}"
    );
    browser.screenshot("alarm-kpis").await;
    browser.assert_accessible("the alarm KPIs").await;
    browser
        .run(
            "document.getElementById('kpi-priorities').scrollIntoView({ block: 'center' });",
            vec![],
        )
        .await;
    browser.screenshot("alarm-kpis-chart").await;
    assert_no_violations(&browser).await;
    browser.resize(PHONE.0, PHONE.1).await;
    browser.screenshot("alarm-kpis-phone").await;
    browser.assert_accessible("the alarm KPIs on a phone").await;
    assert_within_the_screen(&browser, "#kpi-tiles").await;
    browser.click("#tab-alarms").await;
    browser.screenshot("alarm-flood-phone").await;
    browser.assert_accessible("a flood on a phone").await;
    assert_within_the_screen(&browser, "#alarm-flood").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_signed_approvals_the_card_asks_for_the_approvers_password() {
    let rig = PanelRig::start(proposable_solution()).await;
    let path = rig.solution.path.to_str().expect("utf-8 path").to_owned();
    admin(&["settings", &path, "set", "SignedApprovals", "on"], "");
    add_user(&rig.solution, "ops", "ops-pw", "operator");
    let (_driver, browser) = logged_in(&rig, "ops", "ops-pw").await;
    browser.click("#tab-proposals").await;
    // Kept open: a connection's proposals are withdrawn when it closes.
    let proposer = rig.guest().await;
    let id = propose_by_call(&proposer, "Off", "the pump is not needed overnight").await;
    let item = format!("#proposal-list .proposal[data-proposal=\"{id}\"]");
    browser.wait_visible(&item).await;
    browser.click(&format!("{item} [data-decide=\"approve\"]")).await;
    browser.wait_visible(&format!("{item} .proposal-sign")).await;
    browser
        .type_into(&format!("{item} input[type=\"password\"]"), "not-it")
        .await;
    browser.click(&format!("{item} [data-decide=\"sign\"]")).await;
    browser
        .wait_text(&format!("{item} .proposal-error"), "the refusal", |text| {
            text == "Not approved: the signature of ops is refused: unknown user or wrong password. Enter the password again."
        })
        .await;
    browser.screenshot("proposal-signature-refused").await;
    browser
        .type_into(&format!("{item} input[type=\"password\"]"), "ops-pw")
        .await;
    browser.click(&format!("{item} [data-decide=\"sign\"]")).await;
    browser.wait_visible("#proposal-none").await;
    let status = browser
        .wait_text("#proposal-status", "the decision", |text| !text.is_empty())
        .await;
    assert_eq!(status, "Write “Off” to Pump1.Mode: approved by ops: written");
    browser.screenshot("proposal-signed").await;
    assert_eq!(
        mode_of(&rig.guest().await).await,
        Some(WireValue::Text("Off".into()))
    );
    assert_no_violations(&browser).await;
    let trail = admin(&["audit", &path], "");
    assert!(trail.contains("  signed by ops (approved, "), "{trail}");
    browser.close().await;
}
