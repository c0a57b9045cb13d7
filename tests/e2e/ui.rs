//! `drydock ui` in a real browser: headless Chromium (Debian's `chromium`
//! and `chromium-driver`) driven over WebDriver. The console opens with the
//! one-time token, shows a broken container's request appearing live, the
//! operator opens it, approves from the keyboard, sees it reach
//! `completed`, and Docker reports the container healthy. Without the token
//! nothing answers; a cross-site form post and a post without the CSRF
//! token are refused.
//!
//! Screenshots go to `target/ui-screenshots/`, or to the folder in
//! `DRYDOCK_UI_SCREENSHOTS` (`docs/` when refreshing the README's).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use drydock_e2e::*;
use serde_json::{json, Value};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process and one headless Chromium session.
pub(crate) struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    driver: Child,
}

/// Chromium and its WebDriver, from Debian's packages: `scripts/test-env.sh`
/// installs them (the README's test command runs it first); without them
/// the failure says so.
fn ensure_chromium() {
    let present = Command::new("chromedriver")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && std::path::Path::new(CHROMIUM).exists();
    assert!(
        present,
        "the console test needs Debian's chromium and chromium-driver: run scripts/test-env.sh (as root), which installs what the tests need"
    );
}

/// Where Debian's chromium package puts the browser.
const CHROMIUM: &str = "/usr/bin/chromium";

impl Browser {
    pub(crate) async fn start() -> Browser {
        ensure_chromium();
        drydock_daemon::tls::install_crypto_provider();
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start chromedriver (Debian: apt-get install chromium chromium-driver; .ci/run installs them): {e}")
            });
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,900", "--force-device-scale-factor=1"]
            }
        }}});
        let resp: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .expect("new WebDriver session")
            .json()
            .await
            .expect("session JSON");
        let session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {resp}"))
            .to_string();
        Browser {
            http,
            base,
            session,
            driver,
        }
    }

    async fn cmd(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp: Value = req
            .send()
            .await
            .expect("WebDriver call")
            .json()
            .await
            .expect("WebDriver JSON");
        resp["value"].clone()
    }

    pub(crate) async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    pub(crate) async fn run(&self, script: &str) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    async fn find(&self, css: &str) -> Option<String> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT].as_str().map(String::from)
    }

    /// Wait until `css` matches, and its text contains `text`.
    pub(crate) async fn wait_for(&self, css: &str, text: &str, timeout: Duration) -> String {
        let started = Instant::now();
        loop {
            if let Some(id) = self.find(css).await {
                let got = self
                    .cmd(reqwest::Method::GET, &format!("/element/{id}/text"), None)
                    .await;
                if got.as_str().is_some_and(|t| t.contains(text)) {
                    return id;
                }
            }
            if started.elapsed() > timeout {
                let body = self.run("return document.body.innerText").await;
                panic!(
                    "no `{css}` with text {text:?} within {timeout:?}; the page shows:\n{}",
                    body.as_str().unwrap_or("")
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub(crate) async fn press_enter(&self, element: &str) {
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            Some(json!({"text": "\u{E007}"})),
        )
        .await;
    }

    async fn screenshot(&self, name: &str) {
        let dir = std::env::var_os("DRYDOCK_UI_SCREENSHOTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target/ui-screenshots"));
        std::fs::create_dir_all(&dir).expect("screenshot folder");
        let png = self.cmd(reqwest::Method::GET, "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("screenshot base64"))
            .expect("screenshot bytes");
        std::fs::write(dir.join(name), bytes).expect("write screenshot");
    }

    async fn window(&self, width: u32, height: u32) {
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// Chrome DevTools through chromedriver: emulate the system's dark
    /// colour scheme.
    async fn dark(&self, on: bool) {
        let features =
            json!([{"name": "prefers-color-scheme", "value": if on { "dark" } else { "light" }}]);
        self.cmd(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({"cmd": "Emulation.setEmulatedMedia", "params": {"features": features}})),
        )
        .await;
    }

    async fn fill(&self, css: &str, text: &str) {
        let id = self.find(css).await.unwrap_or_else(|| panic!("no {css}"));
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{id}/clear"),
            Some(json!({})),
        )
        .await;
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub(crate) async fn click(&self, css: &str) {
        let id = self.find(css).await.unwrap_or_else(|| panic!("no {css}"));
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    async fn cookie(&self, name: &str) -> Option<String> {
        let v = self
            .cmd(reqwest::Method::GET, &format!("/cookie/{name}"), None)
            .await;
        v["value"].as_str().map(String::from)
    }

    pub(crate) async fn quit(&mut self) {
        let _ = self
            .http
            .delete(format!("{}/session/{}", self.base, self.session))
            .send()
            .await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `drydock ui --no-open` on a free port; its printed URL.
pub(crate) struct Console {
    child: Child,
    pub(crate) url: String,
    pub(crate) origin: String,
}

impl Console {
    pub(crate) fn start(dd: &Drydock) -> Console {
        let mut child = Command::new(bin("drydock"))
            .args(["ui", "--no-open"])
            .env("DRYDOCK_HOME", &dd.home.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start drydock ui");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let Some(url) = first.strip_prefix("drydock console: ").map(String::from) else {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("drydock ui printed {first:?}: {err}");
        };
        std::thread::spawn(move || lines.for_each(drop));
        let origin = url.split("/login").next().unwrap_or("").to_string();
        assert!(
            origin.starts_with("http://127.0.0.1:"),
            "binds loopback only: {url}"
        );
        Console { child, url, origin }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A page on another origin whose form posts to the console by itself.
fn cross_site_page(target: &str) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let page = format!(
        "<!doctype html><form id=f method=POST action=\"{target}\"><input name=x value=1></form><script>document.getElementById('f').submit()</script>"
    );
    let handle = std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    (port, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_approves_from_the_browser_and_refuses_without_its_token() {
    drydock_daemon::tls::install_crypto_provider();
    let dd = Drydock::init();
    let c = Container::unhealthy_web("ui", &[]);
    dd.up();
    let console = Console::start(&dd);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");

    // No token, no page: every page, asset and API.
    for path in [
        "/",
        "/assets/app.js",
        "/api/containers",
        "/api/approvals",
        "/login?token=wrong",
    ] {
        let r = http
            .get(format!("{}{path}", console.origin))
            .send()
            .await
            .expect("GET");
        assert_eq!(r.status(), 401, "{path} without a session");
    }
    let r = http
        .get(format!("{}/", console.origin))
        .header("Host", "evil.example:80")
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 403, "another Host (DNS rebinding) is refused");

    let mut browser = Browser::start().await;
    browser.goto(&console.url).await;
    let row = format!("#container-{}", c.name);
    browser
        .wait_for(&row, "unhealthy", Duration::from_secs(20))
        .await;
    let paint = browser
        .run("return performance.getEntriesByType('paint').map(p => p.name + ' ' + Math.round(p.startTime) + ' ms').join(', ')")
        .await;
    println!("first paint: {}", paint.as_str().unwrap_or("?"));
    browser.screenshot("ui-containers.png").await;
    // The token was used once: a second use is refused.
    let r = http.get(&console.url).send().await.expect("GET");
    assert_eq!(r.status(), 401, "the login link works once");
    // The page sends the security headers.
    let sid = browser.cookie("drydock_ui").await.expect("session cookie");
    let r = http
        .get(format!("{}/", console.origin))
        .header("Cookie", format!("drydock_ui={sid}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap_or("")
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );

    // A request appears live in the list.
    browser
        .goto(&format!("{}/#/requests", console.origin))
        .await;
    browser
        .wait_for("h1", "Requests", Duration::from_secs(10))
        .await;
    let ask_home = dd.home.root.clone();
    let name = c.name.clone();
    let ask = std::thread::spawn(move || {
        Command::new(bin("drydock"))
            .args(["ask", "--container", &name, "the web service is unhealthy"])
            .env("DRYDOCK_HOME", ask_home)
            .stdin(Stdio::null())
            .output()
            .expect("drydock ask")
    });
    let link = browser
        .wait_for(
            "#requests tr a",
            "the web service is unhealthy",
            Duration::from_secs(30),
        )
        .await;
    browser.screenshot("ui-requests.png").await;
    let asked = ask.join().expect("ask thread");
    assert_eq!(
        asked.status.code(),
        Some(3),
        "ask leaves the approval pending without a terminal"
    );

    // Open it: timeline, diagnosis citing evidence, the plan, the approval
    // decoded by the CLI process with the full container id.
    browser
        .cmd(
            reqwest::Method::POST,
            &format!("/element/{link}/click"),
            Some(json!({})),
        )
        .await;
    browser
        .wait_for("#causes", "unhealthy", Duration::from_secs(20))
        .await;
    browser
        .wait_for("#timeline", "diagnosis", Duration::from_secs(20))
        .await;
    browser
        .wait_for("#plan", "restart", Duration::from_secs(20))
        .await;
    let card = browser
        .wait_for(".approval", &c.id(), Duration::from_secs(20))
        .await;
    let _ = card;
    let cite = browser
        .run("return document.querySelector('#causes a.cite').getAttribute('href')")
        .await;
    assert!(
        cite.as_str().is_some_and(|h| h.contains("/ev/ev-")),
        "a cause links to its evidence: {cite}"
    );
    browser.screenshot("ui-request.png").await;
    browser
        .goto(&format!("{}/#/approvals", console.origin))
        .await;
    browser
        .wait_for("#approvals", &c.name, Duration::from_secs(10))
        .await;
    browser.screenshot("ui-approvals.png").await;

    // A post without the CSRF token, or from another origin, is refused
    // even with the session cookie.
    let approval_id = browser
        .run("return document.querySelector('#approvals .approval').id.replace('approval-', '')")
        .await
        .as_str()
        .expect("approval id")
        .to_string();
    let r = http
        .post(format!(
            "{}/api/approvals/{approval_id}/reject",
            console.origin
        ))
        .header("Cookie", format!("drydock_ui={sid}"))
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 403, "no CSRF token");
    let csrf: Value = http
        .get(format!("{}/api/session", console.origin))
        .header("Cookie", format!("drydock_ui={sid}"))
        .send()
        .await
        .expect("session")
        .json()
        .await
        .expect("JSON");
    let r = http
        .post(format!(
            "{}/api/approvals/{approval_id}/reject",
            console.origin
        ))
        .header("Cookie", format!("drydock_ui={sid}"))
        .header("X-CSRF-Token", csrf["csrf"].as_str().unwrap_or(""))
        .header("Origin", "http://evil.example")
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 403, "another origin");
    // A real cross-site form post from the browser.
    let (port, server) = cross_site_page(&format!(
        "{}/api/approvals/{approval_id}/reject",
        console.origin
    ));
    browser.goto(&format!("http://localhost:{port}/")).await;
    let refused = {
        let started = Instant::now();
        loop {
            let text = browser
                .run("return document.body ? document.body.innerText : ''")
                .await;
            let text = text.as_str().unwrap_or("").to_string();
            if text.contains("no session") || text.contains("refused") {
                break text;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the cross-site post was not refused: {text}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    println!("cross-site post: {refused}");
    let _ = server.join();

    // Approve from the keyboard (Enter on the focused button); the request
    // completes and the container is healthy.
    browser
        .goto(&format!("{}/#/approvals", console.origin))
        .await;
    let button = browser
        .wait_for(
            &format!("#approve-{approval_id}"),
            "Approve",
            Duration::from_secs(10),
        )
        .await;
    browser.press_enter(&button).await;
    let request_id = asked_request_id(&asked.stdout);
    browser
        .goto(&format!("{}/#/requests/{request_id}", console.origin))
        .await;
    browser
        .wait_for("h1", "completed", Duration::from_secs(90))
        .await;
    browser
        .wait_for("#timeline", "final", Duration::from_secs(10))
        .await;
    assert_eq!(c.health(), "healthy", "Docker reports it healthy");
    browser.screenshot("ui-completed.png").await;

    // A follow-up on the finished request reopens it as round 2, from
    // fresh evidence; the first round is listed as it ended.
    browser
        .fill(
            "#followup-text",
            "it started after we rotated the db password",
        )
        .await;
    browser.click("#followup-send").await;
    browser
        .wait_for("#status", "reopened as round 2", Duration::from_secs(10))
        .await;
    browser
        .wait_for("#earlier-rounds", "round 1", Duration::from_secs(30))
        .await;
    browser
        .wait_for(
            "#followups",
            "rotated the db password",
            Duration::from_secs(10),
        )
        .await;
    browser
        .wait_for("h1", "completed", Duration::from_secs(60))
        .await;
    let round: Value = serde_json::from_slice(&dd.cli(&["show", &request_id, "--json"]).stdout)
        .expect("show --json");
    assert_eq!(
        round["earlier_rounds"][0]["status"], "completed",
        "{round:#}"
    );
    assert_eq!(round["status"], "completed", "round 2 ended: {round:#}");

    // Dark mode follows the system's colour scheme.
    browser.dark(true).await;
    let background = browser
        .run("return getComputedStyle(document.body).backgroundColor")
        .await;
    assert_eq!(background, "rgb(15, 18, 22)", "dark background");
    browser.screenshot("ui-dark.png").await;
    browser.dark(false).await;

    // A grant: built and shown in words here, signed only on confirmation.
    browser.goto(&format!("{}/#/grants", console.origin)).await;
    browser
        .wait_for("h1", "grants", Duration::from_secs(10))
        .await;
    browser.fill("input[name=names]", &c.name).await;
    browser.fill("input[name=classes]", "unhealthy").await;
    browser.click("#grant-form button[type=submit]").await;
    browser
        .wait_for("#grant-preview", "restart", Duration::from_secs(10))
        .await;
    browser.click("#grant-sign").await;
    browser
        .wait_for("#grants", "active", Duration::from_secs(10))
        .await;
    let grants = dd.cli(&["grant", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&grants.stdout).expect("grant list --json");
    assert_eq!(
        listed["grants"][0]["grant"]["claims"]["scope"]["names"][0],
        c.name.as_str(),
        "the grant the console signed is the one shown: {listed:#}"
    );

    // A schedule, added here and run by the agent: its answer shows.
    browser
        .goto(&format!("{}/#/schedules", console.origin))
        .await;
    browser
        .wait_for("h1", "Schedules", Duration::from_secs(10))
        .await;
    browser
        .fill("#schedule-message", &format!("is {} healthy?", c.name))
        .await;
    browser.fill("#schedule-every", "1h").await;
    browser.click("#schedule-add").await;
    browser
        .wait_for("#status", "added sch-", Duration::from_secs(10))
        .await;
    browser
        .wait_for("#schedules", "every 1 h", Duration::from_secs(10))
        .await;
    browser
        .wait_for("#schedules", "Last run", Duration::from_secs(30))
        .await;
    let schedules: Value = serde_json::from_slice(&dd.cli(&["schedule", "list", "--json"]).stdout)
        .expect("schedule list --json");
    assert_eq!(
        schedules["schedules"][0]["every_secs"], 3600,
        "{schedules:#}"
    );

    browser.window(390, 844).await;
    browser
        .goto(&format!("{}/#/requests", console.origin))
        .await;
    browser
        .wait_for("#requests", "completed", Duration::from_secs(10))
        .await;
    browser.screenshot("ui-narrow.png").await;
    browser.quit().await;
}

/// The request id `drydock ask` printed (it names the request it created).
fn asked_request_id(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .find(|w| w.starts_with("req-") && w.len() > 10)
        .unwrap_or_else(|| panic!("no request id in ask's output: {text}"))
        .to_string()
}
