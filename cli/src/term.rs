//! The terminal: colour (`--color auto|always|never`, `NO_COLOR`), the
//! spinner that shows the current phase during long waits, and prompts that
//! a Ctrl-C can interrupt.
//!
//! Everything here degrades to plain text: no colour and no spinner when the
//! output is not a terminal, so scripts and CI logs get stable lines.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when standard output is a terminal and `NO_COLOR` is unset.
    #[default]
    Auto,
    Always,
    Never,
}

static COLOR: AtomicBool = AtomicBool::new(false);

/// Decide once, at start-up. `always`/`never` win over `NO_COLOR`, which
/// only changes what `auto` means (<https://no-color.org>).
pub fn init_color(choice: ColorChoice) {
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stdout().is_terminal()
        }
    };
    COLOR.store(on, Ordering::Relaxed);
}

pub fn color_enabled() -> bool {
    COLOR.load(Ordering::Relaxed)
}

#[derive(Debug, Clone, Copy)]
pub enum Style {
    Good,
    Bad,
    Warn,
    Bold,
    Dim,
}

/// `text` in `style` when colour is on; `text` unchanged otherwise.
pub fn paint(text: &str, style: Style) -> String {
    if !color_enabled() {
        return text.to_string();
    }
    let code = match style {
        Style::Good => "32",
        Style::Bad => "31",
        Style::Warn => "33",
        Style::Bold => "1",
        Style::Dim => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// A spinner on standard error with the request's current phase. It draws
/// only on a terminal, only while nothing else is printed, and erases itself
/// before any other line appears.
#[derive(Clone)]
pub struct Spinner {
    inner: Option<Arc<SpinnerState>>,
}

struct SpinnerState {
    phase: Mutex<String>,
    shown: AtomicBool,
    stop: AtomicBool,
}

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl Spinner {
    /// A spinner that never draws (quiet or JSON output).
    pub fn none() -> Spinner {
        Spinner { inner: None }
    }

    /// Running only when both standard output and error are terminals.
    pub fn start() -> Spinner {
        if !(std::io::stderr().is_terminal() && std::io::stdout().is_terminal()) {
            return Spinner { inner: None };
        }
        let state = Arc::new(SpinnerState {
            phase: Mutex::new("starting".into()),
            shown: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let s = state.clone();
        tokio::spawn(async move {
            let mut frame = 0usize;
            while !s.stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(120)).await;
                let phase = s.phase.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K{} {phase}…", FRAMES[frame % FRAMES.len()]);
                let _ = err.flush();
                s.shown.store(true, Ordering::Relaxed);
                frame += 1;
            }
        });
        Spinner { inner: Some(state) }
    }

    pub fn set_phase(&self, phase: &str) {
        if let Some(s) = &self.inner {
            *s.phase.lock().unwrap_or_else(|p| p.into_inner()) = phase.to_string();
        }
    }

    /// Erase the spinner line so the next line prints cleanly.
    pub fn clear(&self) {
        if let Some(s) = &self.inner {
            if s.shown.swap(false, Ordering::Relaxed) {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K");
                let _ = err.flush();
            }
        }
    }

    pub fn stop(&self) {
        if let Some(s) = &self.inner {
            s.stop.store(true, Ordering::Relaxed);
        }
        self.clear();
    }
}

impl Drop for SpinnerState {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Lines typed on standard input, read by one thread for the whole process,
/// so a prompt is an `await` that a Ctrl-C can interrupt (a blocking read
/// inside the async code would swallow the interrupt until Enter).
pub async fn read_line() -> Option<String> {
    static LINES: OnceLock<tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>> = OnceLock::new();
    let lines = LINES.get_or_init(|| {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            loop {
                let mut line = String::new();
                match stdin.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        tokio::sync::Mutex::new(rx)
    });
    lines.lock().await.recv().await
}

/// Ask a yes/no question; anything but y/yes (or end of input) is no.
pub async fn confirm(question: &str) -> bool {
    print!("{question} [y/N] ");
    let _ = std::io::stdout().flush();
    matches!(
        read_line()
            .await
            .map(|l| l.trim().to_ascii_lowercase())
            .as_deref(),
        Some("y" | "yes")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_means_plain_text_and_always_means_ansi() {
        init_color(ColorChoice::Never);
        assert_eq!(paint("ok", Style::Good), "ok");
        init_color(ColorChoice::Always);
        assert_eq!(paint("ok", Style::Good), "\x1b[32mok\x1b[0m");
        init_color(ColorChoice::Never);
    }
}
