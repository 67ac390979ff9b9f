//! A real headless Chromium for the panel's tests, driven through chromedriver (WebDriver) by
//! fantoccini: chromedriver started on a free loopback port, one browser session per
//! [`Browser`], a 1024x768 window (a panel PC) unless told otherwise, and screenshots under
//! `target/panel-screenshots/`, and axe-core's accessibility checks. Where Chromium,
//! chromedriver or axe-core is not installed it fails saying how to install them.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// Debian's packages put them here.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A panel PC's screen, in CSS pixels.
pub const PANEL_PC: (u32, u32) = (1024, 768);

/// Longest a test waits for the page to show something that should come at once.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Where screenshots go (the workspace's `target/`).
pub fn screenshot_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/panel-screenshots"
    ))
}

/// axe-core's script, read once from where `npm install -g axe-core` put it.
fn axe_source() -> &'static str {
    static SOURCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SOURCE.get_or_init(|| {
        let root = Command::new("npm")
            .args(["root", "-g"])
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
        let path = root.map(|root| PathBuf::from(root).join("axe-core/axe.min.js"));
        path.as_deref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_else(|| {
                panic!(
                    "axe-core is missing ({path:?}): install it with `npm install -g axe-core@4.11.0` \
                     (.ci/run does)"
                )
            })
    })
}

/// One DevTools protocol command, as chromedriver takes it beside WebDriver's own.
#[derive(Debug)]
struct DevTools {
    command: &'static str,
    params: Value,
}

impl fantoccini::wd::WebDriverCompatibleCommand for DevTools {
    fn endpoint(&self, base_url: &url::Url, session_id: Option<&str>) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"cmd": self.command, "params": self.params}).to_string()),
        )
    }
}

/// A chromedriver process of this test; killed when dropped.
#[derive(Debug)]
pub struct Chromedriver {
    child: Child,
    url: String,
}

impl Chromedriver {
    /// Starts chromedriver on a free loopback port and waits until it accepts connections.
    pub fn start() -> Self {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                std::path::Path::new(path).exists(),
                "{path} is missing ({package}): install chromium and chromium-driver with \
                 `apt-get install -y chromium chromium-driver` (.ci/run does)"
            );
        }
        let address = crate::haproxy::free_loopback_addr();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={}", address.port()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let mut driver = Self {
            child,
            url: format!("http://{address}"),
        };
        let deadline = Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(address).is_err() {
            let exited = driver.child.try_wait().ok().flatten();
            assert!(
                Instant::now() < deadline && exited.is_none(),
                "chromedriver did not listen on {address} ({exited:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        driver
    }

    /// A new headless Chromium window of `width` x `height` CSS pixels, with a profile of its
    /// own (cookies start empty).
    pub async fn browser(&self, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    // Tests run as root in CI, where Chromium's sandbox cannot start.
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    "--force-device-scale-factor=1",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
                "prefs": {
                    "download.default_directory": profile.path().join("downloads"),
                    "download.prompt_for_download": false,
                },
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .expect("chromedriver opens a Chromium session");
        let browser = Browser {
            client,
            _profile: profile,
        };
        browser.resize(width, height).await;
        browser
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
#[derive(Debug)]
pub struct Browser {
    /// The WebDriver client, for what the helpers below do not cover.
    pub client: Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Where the browser saves downloads.
    pub fn downloads(&self) -> PathBuf {
        self._profile.path().join("downloads")
    }

    /// Waits until a download named `name` has completed; returns its bytes.
    pub async fn downloaded(&self, name: &str) -> Vec<u8> {
        let path = self.downloads().join(name);
        self.wait_until(&format!("the download {}", path.display()), || async {
            path.exists()
        })
        .await;
        std::fs::read(&path).expect("the download reads")
    }

    /// Sends keys (text, or `fantoccini::key::Key` characters) to the focused element.
    pub async fn keys(&self, keys: &str) {
        self.client
            .active_element()
            .await
            .expect("a focused element")
            .send_keys(keys)
            .await
            .expect("the keys are sent");
    }

    /// Opens `url` and waits until the document has loaded.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.expect("the page opens");
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.expect("the script runs")
    }

    /// Runs `script` as an asynchronous function body: it ends by calling the last of its
    /// `arguments` with its result.
    pub async fn run_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute_async(script, args)
            .await
            .expect("the script runs")
    }

    /// Waits until `css` matches a displayed element.
    pub async fn wait_visible(&self, css: &str) {
        self.wait_until(&format!("{css} is shown"), || async {
            match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.is_displayed().await.unwrap_or(false),
                Err(_) => false,
            }
        })
        .await;
    }

    /// Waits until the text of the first element matching `css` satisfies `wanted`; returns it.
    pub async fn wait_text(&self, css: &str, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self.text(css).await;
            if let Some(text) = &text
                && wanted(text)
            {
                return text.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{what}: `{css}` reads {text:?} after {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The text of the first element matching `css` (its `textContent`, hidden or not).
    pub async fn text(&self, css: &str) -> Option<String> {
        let value = self
            .run(
                "const node = document.querySelector(arguments[0]); return node ? node.textContent : null;",
                vec![json!(css)],
            )
            .await;
        value.as_str().map(str::to_owned)
    }

    /// Waits until `condition` holds, failing with `what` after the patience.
    pub async fn wait_until<F, Fut>(&self, what: &str, condition: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + PATIENCE;
        while !condition().await {
            assert!(Instant::now() < deadline, "not seen within {PATIENCE:?}: {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the first element matching `css`, found again while the page redraws it (a
    /// live page replaces elements under the pointer: a stale or covered one is retried).
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let outcome = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.click().await.map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match outcome {
                Ok(()) => return,
                Err(error) => assert!(
                    Instant::now() < deadline,
                    "`{css}` cannot be clicked within {PATIENCE:?}: {error}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Types `text` into the first element matching `css` (after clearing it).
    pub async fn type_into(&self, css: &str, text: &str) {
        let field = self
            .client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("no `{css}` to type into: {error}"));
        field.clear().await.expect("the field clears");
        field.send_keys(text).await.expect("the text is typed");
    }

    /// Saves a screenshot of the window as `target/panel-screenshots/NAME.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("the screenshot directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("the screenshot is written");
        path
    }

    /// Runs axe-core on the page as it stands and fails naming every serious or critical
    /// accessibility violation (WCAG 2.1 A and AA, contrast among them) on `screen`.
    pub async fn assert_accessible(&self, screen: &str) {
        let found = self.accessibility_violations().await;
        assert_eq!(found, json!([]), "accessibility of {screen}");
    }

    /// axe-core's serious and critical findings on the page as it stands, each as its impact,
    /// rule, help and where.
    pub async fn accessibility_violations(&self) -> Value {
        let loaded = self.run("return typeof window.axe === 'object';", vec![]).await;
        if loaded != json!(true) {
            self.run(axe_source(), vec![]).await;
        }
        self.run_async(
                "const done = arguments[arguments.length - 1];\
                 window.axe.run(document, { resultTypes: ['violations'] }).then((result) => done(\
                   result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')\
                     .map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`)),\
                   (error) => done([`axe failed: ${error}`]));",
                vec![],
            )
            .await
    }

    /// Seconds Chromium's main thread for the page has spent in tasks since the page loaded
    /// (the DevTools protocol's `Performance.getMetrics` `TaskDuration`, through
    /// chromedriver): what a busy page costs the device it runs on.
    pub async fn main_thread_seconds(&self) -> f64 {
        self.devtools("Performance.enable", json!({})).await;
        let metrics = self.devtools("Performance.getMetrics", json!({})).await;
        metrics["metrics"]
            .as_array()
            .and_then(|metrics| metrics.iter().find(|metric| metric["name"] == "TaskDuration"))
            .and_then(|metric| metric["value"].as_f64())
            .unwrap_or_else(|| panic!("Chromium gave no TaskDuration: {metrics}"))
    }

    /// Runs a DevTools protocol command on the page (chromedriver's `goog/cdp/execute`).
    async fn devtools(&self, command: &'static str, params: Value) -> Value {
        self.client
            .issue_cmd(DevTools { command, params })
            .await
            .unwrap_or_else(|error| panic!("chromedriver ran no {command}: {error}"))
    }

    /// Resizes the window so that the page's viewport is `width` x `height` CSS pixels (the
    /// window's own frame, headless or not, takes some of the window size).
    pub async fn resize(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .expect("the window resizes");
        let inner = self
            .run("return [window.innerWidth, window.innerHeight];", vec![])
            .await;
        let frame = |index: usize, wanted: u32| {
            let inner = inner[index].as_u64().and_then(|value| u32::try_from(value).ok());
            wanted + wanted.saturating_sub(inner.unwrap_or(wanted))
        };
        self.client
            .set_window_size(frame(0, width), frame(1, height))
            .await
            .expect("the window resizes");
    }

    /// Ends the browser session.
    pub async fn close(self) {
        self.client.close().await.expect("the session ends");
    }
}
