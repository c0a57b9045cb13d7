//! Graceful shutdown: SIGTERM (what `docker stop` and systemd send) and
//! SIGINT both mean "stop accepting, finish what is in flight".

use nix::sys::signal::Signal;

/// Resolves on the first SIGTERM or SIGINT and says which it was.
pub async fn shutdown() -> Signal {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => tokio::select! {
            _ = term.recv() => Signal::SIGTERM,
            _ = int.recv() => Signal::SIGINT,
        },
        // Registering a handler fails only when the runtime has no signal
        // driver; fall back to Ctrl-C rather than never shutting down.
        _ => {
            let _ = tokio::signal::ctrl_c().await;
            Signal::SIGINT
        }
    }
}
