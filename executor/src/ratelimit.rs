//! Per-identity rate limiting, and coalescing of the refusals it causes, so
//! a compromised or buggy agent (or anyone holding a certificate of the
//! drydock CA) can neither starve the executor nor fill the audit disk.
//!
//! Each caller identity (the certificate's CN, allowed or not) has a token
//! bucket. A call that finds the bucket empty is refused with
//! RESOURCE_EXHAUSTED before any work. Its audit row is written only for the
//! first few refusals of a window; the rest are counted and written as one
//! summary row when the next window opens.

use crate::audit::{AuditEntry, AuditLog};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Identities remembered at once; the least recently seen is forgotten
/// first (a forgotten identity starts again with a full bucket).
const MAX_IDENTITIES: usize = 1024;
/// Refusal rows written per identity and window before they are summarized.
pub const REFUSAL_ROWS_PER_WINDOW: u32 = 10;
pub const REFUSAL_WINDOW: Duration = Duration::from_secs(10);

struct Bucket {
    tokens: f64,
    last: Instant,
    window_start: Instant,
    written: u32,
    suppressed: u64,
    /// When the last summary row was handed out: at most one per window.
    summarized_at: Option<Instant>,
}

pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// What the limiter decided for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Allowed,
    /// Refused; `audit` says whether this refusal gets its own row.
    Limited {
        audit: bool,
    },
}

impl RateLimiter {
    pub fn new(per_second: u32, burst: u32) -> RateLimiter {
        RateLimiter {
            per_second: f64::from(per_second),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take one token for `identity`.
    pub fn admit(&self, identity: &str) -> Admission {
        self.admit_at(identity, Instant::now())
    }

    fn admit_at(&self, identity: &str, now: Instant) -> Admission {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(identity) && buckets.len() >= MAX_IDENTITIES {
            if let Some(oldest) = buckets
                .iter()
                .min_by_key(|(_, b)| b.last)
                .map(|(k, _)| k.clone())
            {
                buckets.remove(&oldest);
            }
        }
        let b = buckets.entry(identity.to_string()).or_insert(Bucket {
            tokens: self.burst,
            last: now,
            window_start: now,
            written: 0,
            suppressed: 0,
            summarized_at: None,
        });
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.per_second).min(self.burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Admission::Allowed;
        }
        if now.saturating_duration_since(b.window_start) >= REFUSAL_WINDOW {
            b.window_start = now;
            b.written = 0;
        }
        if b.written < REFUSAL_ROWS_PER_WINDOW {
            b.written += 1;
            Admission::Limited { audit: true }
        } else {
            b.suppressed += 1;
            Admission::Limited { audit: false }
        }
    }

    /// Refusals of `identity` that were counted but not written, for a
    /// summary row: at most one summary per identity and window, so the
    /// summaries themselves cannot become the flood. Resets the count.
    pub fn take_suppressed(&self, identity: &str) -> u64 {
        self.take_suppressed_at(identity, Instant::now())
    }

    fn take_suppressed_at(&self, identity: &str, now: Instant) -> u64 {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let Some(b) = buckets.get_mut(identity) else {
            return 0;
        };
        let due = b
            .summarized_at
            .is_none_or(|t| now.saturating_duration_since(t) >= REFUSAL_WINDOW);
        if b.suppressed == 0 || !due {
            return 0;
        }
        b.summarized_at = Some(now);
        std::mem::take(&mut b.suppressed)
    }

    /// Every identity's counted refusals that are due for a summary (for
    /// the periodic flush, so a caller that stops calling still has its
    /// last burst in the chain), or all of them at shutdown.
    pub fn take_all_suppressed(&self, even_if_not_due: bool) -> Vec<(String, u64)> {
        self.take_all_suppressed_at(Instant::now(), even_if_not_due)
    }

    fn take_all_suppressed_at(&self, now: Instant, even_if_not_due: bool) -> Vec<(String, u64)> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (identity, b) in buckets.iter_mut() {
            let due = even_if_not_due
                || b.summarized_at
                    .is_none_or(|t| now.saturating_duration_since(t) >= REFUSAL_WINDOW);
            if b.suppressed > 0 && due {
                b.summarized_at = Some(now);
                out.push((identity.clone(), std::mem::take(&mut b.suppressed)));
            }
        }
        out.sort();
        out
    }
}

/// The summary row for `count` refusals of `identity` that were counted,
/// not written one by one.
pub fn summary_entry(identity: &str, count: u64) -> AuditEntry {
    AuditEntry {
        caller: identity.to_string(),
        action: "rate_limit".into(),
        decision: crate::audit::Decision::Denied,
        code: crate::audit::Code::of(tonic::Code::ResourceExhausted),
        reason: format!(
            "{count} further calls from {identity} refused by the rate limit (counted, not written one by one)"
        ),
        ..Default::default()
    }
}

/// Refusals that cost the caller nothing (a refused TLS handshake; a health
/// probe whose certificate the CA signed for a CN that is not allowed) get
/// their audit rows one by one up to `REFUSAL_ROWS_BURST` per
/// `REFUSAL_WINDOW`, each committed before the refusal is answered; the
/// rest are counted and summarized in one row when the next window opens
/// (or by the periodic flush). A flood then costs at most that many fsyncs
/// a window.
pub const REFUSAL_ROWS_BURST: u32 = 20;

pub struct RefusalRows {
    /// The rows' `action`, and what the summary row calls the refusals.
    action: &'static str,
    what: &'static str,
    /// The window's start, rows written in it, refusals only counted.
    state: Mutex<(Option<Instant>, u32, u32)>,
}

impl RefusalRows {
    /// Refused handshakes (`connect` rows).
    pub fn handshakes() -> RefusalRows {
        RefusalRows::new("connect", "refused TLS handshakes")
    }

    /// Refused health probes (`health` rows).
    pub fn health_probes() -> RefusalRows {
        RefusalRows::new("health", "refused health checks")
    }

    fn new(action: &'static str, what: &'static str) -> RefusalRows {
        RefusalRows {
            action,
            what,
            state: Mutex::new((None, 0, 0)),
        }
    }

    /// Audit one refusal: its row (`entry`, built only if it is written)
    /// while the window's count allows, and first the summary of a window
    /// that closed with refusals only counted. Each is committed before
    /// this returns.
    pub fn audit(&self, log: &AuditLog, entry: impl FnOnce() -> AuditEntry) {
        let (write, counted) = self.admit();
        let rows = (counted > 0)
            .then(|| self.summary(counted))
            .into_iter()
            .chain(write.then(entry));
        for row in rows {
            if let Err(e) = log.append(&row) {
                tracing::error!(error = %e, action = self.action, "audit write failed for a refusal");
            }
        }
    }

    /// The row that stands for `count` refusals counted, not written.
    pub fn summary(&self, count: u32) -> AuditEntry {
        AuditEntry {
            caller: "unauthenticated".into(),
            action: self.action.into(),
            decision: crate::audit::Decision::Denied,
            code: crate::audit::Code::of(tonic::Code::Unauthenticated),
            reason: format!(
                "{count} further {} in the previous window (rate limited)",
                self.what
            ),
            ..Default::default()
        }
    }

    /// `(write this row?, refusals counted in the window that just closed)`.
    fn admit(&self) -> (bool, u32) {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> (bool, u32) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (start, written, suppressed) = &mut *s;
        let mut closed = 0;
        if start.is_none_or(|t| now.saturating_duration_since(t) >= REFUSAL_WINDOW) {
            *start = Some(now);
            *written = 0;
            closed = std::mem::take(suppressed);
        }
        if *written < REFUSAL_ROWS_BURST {
            *written += 1;
            (true, closed)
        } else {
            *suppressed += 1;
            (false, closed)
        }
    }

    /// Refusals counted in a window that has closed (or, at shutdown, in
    /// the current one), for the periodic flush.
    pub fn take_closed(&self, even_if_open: bool) -> u32 {
        self.take_closed_at(Instant::now(), even_if_open)
    }

    fn take_closed_at(&self, now: Instant, even_if_open: bool) -> u32 {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (start, _, suppressed) = &mut *s;
        let closed = start.is_none_or(|t| now.saturating_duration_since(t) >= REFUSAL_WINDOW);
        if closed || even_if_open {
            std::mem::take(suppressed)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod refusal_rows_tests {
    use super::*;

    #[test]
    fn a_burst_is_written_and_the_rest_counted_once() {
        let rows = RefusalRows::handshakes();
        let t0 = Instant::now();
        for _ in 0..REFUSAL_ROWS_BURST {
            assert_eq!(rows.admit_at(t0), (true, 0));
        }
        for _ in 0..5 {
            assert_eq!(rows.admit_at(t0), (false, 0));
        }
        // Still open: the flush leaves the count for later.
        assert_eq!(rows.take_closed_at(t0, false), 0);
        // The next window's first refusal is written and carries the count.
        let t1 = t0 + REFUSAL_WINDOW;
        assert_eq!(rows.admit_at(t1), (true, 5));
        assert_eq!(rows.admit_at(t1), (true, 0));
    }

    #[test]
    fn the_flush_takes_a_closed_window_and_everything_at_shutdown() {
        let rows = RefusalRows::handshakes();
        let t0 = Instant::now();
        for _ in 0..REFUSAL_ROWS_BURST + 3 {
            rows.admit_at(t0);
        }
        assert_eq!(rows.take_closed_at(t0 + REFUSAL_WINDOW, false), 3);
        assert_eq!(rows.take_closed_at(t0 + REFUSAL_WINDOW, false), 0);
        rows.admit_at(t0 + REFUSAL_WINDOW);
        for _ in 0..REFUSAL_ROWS_BURST {
            rows.admit_at(t0 + REFUSAL_WINDOW);
        }
        assert_eq!(rows.take_closed_at(t0 + REFUSAL_WINDOW, true), 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate_and_refusal_rows_are_bounded() {
        let limiter = RateLimiter::new(10, 5);
        let t0 = Instant::now();
        for _ in 0..5 {
            assert_eq!(limiter.admit_at("a", t0), Admission::Allowed);
        }
        let mut audited = 0;
        for _ in 0..100 {
            match limiter.admit_at("a", t0) {
                Admission::Limited { audit: true } => audited += 1,
                Admission::Limited { audit: false } => {}
                Admission::Allowed => panic!("over the burst"),
            }
        }
        assert_eq!(audited, REFUSAL_ROWS_PER_WINDOW);
        assert_eq!(
            limiter.take_suppressed_at("a", t0),
            100 - u64::from(REFUSAL_ROWS_PER_WINDOW)
        );
        assert_eq!(limiter.take_suppressed_at("a", t0), 0);
        // More refusals in the same window wait for the next one.
        for _ in 0..5 {
            let _ = limiter.admit_at("a", t0);
        }
        assert_eq!(limiter.take_suppressed_at("a", t0), 0);
        assert_eq!(limiter.take_suppressed_at("a", t0 + REFUSAL_WINDOW), 5);
        // Another identity has its own bucket.
        assert_eq!(limiter.admit_at("b", t0), Admission::Allowed);
        // Half a second later, five tokens again (10 per second).
        let later = t0 + Duration::from_millis(500);
        for _ in 0..5 {
            assert_eq!(limiter.admit_at("a", later), Admission::Allowed);
        }
        assert!(matches!(
            limiter.admit_at("a", later),
            Admission::Limited { .. }
        ));
        // A new window writes rows again.
        let next = t0 + REFUSAL_WINDOW + Duration::from_millis(1);
        let _ = limiter.admit_at("a", next);
        let mut rows = 0;
        for _ in 0..20 {
            if limiter.admit_at("a", next) == (Admission::Limited { audit: true }) {
                rows += 1;
            }
        }
        assert!(rows > 0 && rows <= REFUSAL_ROWS_PER_WINDOW);
    }

    #[test]
    fn the_flush_takes_every_due_count_once() {
        let limiter = RateLimiter::new(1, 1);
        let t0 = Instant::now();
        for id in ["a", "b"] {
            for _ in 0..(REFUSAL_ROWS_PER_WINDOW + 4) {
                let _ = limiter.admit_at(id, t0);
            }
        }
        assert_eq!(
            limiter.take_all_suppressed_at(t0, false),
            [("a".to_string(), 3), ("b".to_string(), 3)]
        );
        assert!(limiter.take_all_suppressed_at(t0, false).is_empty());
        let _ = limiter.admit_at("a", t0);
        assert!(
            limiter.take_all_suppressed_at(t0, false).is_empty(),
            "one summary per window"
        );
        assert_eq!(
            limiter.take_all_suppressed_at(t0, true),
            [("a".to_string(), 1)],
            "at shutdown everything is written"
        );
    }

    #[test]
    fn the_identity_table_is_bounded() {
        let limiter = RateLimiter::new(1, 1);
        let t0 = Instant::now();
        for i in 0..(MAX_IDENTITIES + 50) {
            let _ = limiter.admit_at(&format!("id-{i}"), t0 + Duration::from_micros(i as u64));
        }
        let len = limiter.buckets.lock().unwrap().len();
        assert_eq!(len, MAX_IDENTITIES);
    }
}
