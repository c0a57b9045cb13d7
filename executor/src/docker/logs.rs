//! Container logs: the engine's messages joined into lines per stream, each
//! with the time the engine received it, the newest kept within a byte
//! budget.
//!
//! The engine is asked for timestamps unless the container has a TTY. Each
//! message it sends then starts with one (RFC 3339, nanoseconds), also
//! every part of a line it split at 16 KiB, so the prefix is taken off
//! every message before the parts are joined; a line's time is its first
//! part's. The time is what lets the agent read what a container said
//! before a death the engine recorded, and nothing of it is container
//! output, so it is never shaped or redacted. A TTY's log is one raw
//! stream that bollard cuts at newlines, not at the engine's messages: a
//! timestamp of a line's second part would land inside the line, where it
//! could split a secret in two and hide it from redaction, so a TTY's
//! lines have no time.

use std::collections::VecDeque;

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use futures::StreamExt as _;

use super::{classify, DockerAdapter, DockerError};
use crate::policy::{Permit, Read};

/// One log line longer than this is cut (a binary blob printed to stdout),
/// after it is redacted whole.
const MAX_LINE_BYTES: usize = 16 * 1024;
/// Partial messages of one line are joined up to this many bytes.
const MAX_JOINED_BYTES: usize = 64 * 1024;
/// The longest timestamp prefix the engine writes
/// (`2006-01-02T15:04:05.000000000+07:00`), with room to spare.
const MAX_TIMESTAMP_LEN: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStream {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RawLogLine {
    pub stream: LogStream,
    pub bytes: Vec<u8>,
    /// When the engine received the line's first part, in unix
    /// nanoseconds; 0 when it gave no time.
    pub time_nanos: i64,
    /// Redactions already made here (a long line is redacted before it is
    /// cut); the service adds them to the call's count.
    pub redactions: u32,
}

/// Which log lines to read.
#[derive(Debug, Clone, Copy)]
pub struct LogQuery {
    pub tail: u32,
    /// Ask the engine for each message's time (never for a TTY).
    pub timestamps: bool,
    /// Unix seconds; 0 for no bound.
    pub since: i64,
    /// Unix seconds, the lines of that second included; 0 for no bound.
    pub until: i64,
    pub stdout: bool,
    pub stderr: bool,
}

const CUT_MARKER: &str = " [line truncated]";

/// The length a line will have once `cut_long_line` is done with it.
fn cut_len(len: usize) -> usize {
    if len <= MAX_LINE_BYTES {
        len
    } else {
        MAX_LINE_BYTES + CUT_MARKER.len()
    }
}

/// A line longer than `MAX_LINE_BYTES` is redacted whole, then cut: cutting
/// first could leave half a secret that no pattern recognises.
/// Returns the line and the redactions made while cutting it.
fn cut_long_line(raw: Vec<u8>, truncated: &mut bool) -> (Vec<u8>, u32) {
    if raw.len() <= MAX_LINE_BYTES {
        return (raw, 0);
    }
    *truncated = true;
    let (text, redactions) = crate::redact::shape_log_line(&raw);
    let mut end = text.len().min(MAX_LINE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut line = text.as_bytes()[..end].to_vec();
    line.extend_from_slice(CUT_MARKER.as_bytes());
    (line, redactions)
}

/// `2024-05-01T03:00:12.123456789Z` (or with an offset, `+02:00`) as unix
/// nanoseconds; `None` for anything else.
pub(super) fn parse_rfc3339_nanos(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(at(4, b'-')
        && at(7, b'-')
        && (at(10, b'T') || at(10, b't'))
        && at(13, b':')
        && at(16, b':'))
    {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if at(i, b'.') {
        let count = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if count == 0 || count > 9 {
            return None;
        }
        nanos = digits(i + 1, count)? * 10i64.pow(9 - count as u32);
        i += 1 + count;
    }
    let offset_secs = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && at(i + 3, b':') => {
            let (h, m) = (digits(i + 1, 2)?, digits(i + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_secs;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The engine's timestamp prefix and the message after it; a message
/// without one (an engine that ignored the option) keeps all its bytes.
pub(super) fn split_timestamp(message: &[u8]) -> (i64, &[u8]) {
    let head = &message[..message.len().min(MAX_TIMESTAMP_LEN)];
    let Some(space) = head.iter().position(|b| *b == b' ') else {
        return (0, message);
    };
    match std::str::from_utf8(&head[..space])
        .ok()
        .and_then(parse_rfc3339_nanos)
    {
        Some(t) => (t, &message[space + 1..]),
        None => (0, message),
    }
}

/// The engine's messages, joined into lines per stream, the newest kept
/// within the line and byte budgets: the end of a log is where a crash
/// explains itself.
pub(super) struct LineJoiner {
    kept: VecDeque<RawLogLine>,
    bytes: usize,
    max_bytes: usize,
    max_lines: usize,
    /// Each message starts with the engine's timestamp.
    timestamps: bool,
    truncated: bool,
    /// Per stream (stdout, stderr): the time of the line's first part and
    /// its bytes so far.
    pending: [(i64, Vec<u8>); 2],
}

impl LineJoiner {
    pub(super) fn new(max_lines: usize, max_bytes: usize, timestamps: bool) -> LineJoiner {
        LineJoiner {
            kept: VecDeque::new(),
            bytes: 0,
            max_bytes,
            max_lines,
            timestamps,
            truncated: false,
            pending: [(0, Vec::new()), (0, Vec::new())],
        }
    }

    /// One message as the engine sent it, timestamp first. Docker splits a
    /// line longer than 16 KiB into partial messages (and a TTY's output
    /// comes in arbitrary chunks): bytes are joined per stream up to each
    /// newline, so a secret split across messages is redacted whole.
    pub(super) fn push(&mut self, stream: LogStream, message: &[u8]) {
        let (time, message) = if self.timestamps {
            split_timestamp(message)
        } else {
            (0, message)
        };
        for piece in message.split_inclusive(|b| *b == b'\n') {
            let slot = usize::from(stream == LogStream::Stderr);
            let (line_time, buf) = &mut self.pending[slot];
            if buf.is_empty() {
                *line_time = time;
            }
            let room = MAX_JOINED_BYTES.saturating_sub(buf.len());
            if piece.len() > room {
                self.truncated = true;
            }
            buf.extend_from_slice(&piece[..piece.len().min(room)]);
            if piece.ends_with(b"\n") {
                let line = std::mem::take(buf);
                let time = *line_time;
                self.keep(stream, line, time);
            }
        }
    }

    /// Keep a whole line. A long one is kept as it came and cut (after
    /// redacting it whole) only if it is still kept at the end, so a
    /// window of long lines costs one redaction per line answered, not per
    /// line read; it counts against the budget at its cut length.
    fn keep(&mut self, stream: LogStream, raw: Vec<u8>, time_nanos: i64) {
        self.bytes += cut_len(raw.len());
        self.kept.push_back(RawLogLine {
            stream,
            bytes: raw,
            time_nanos,
            redactions: 0,
        });
        // More lines than the tail asked for: the oldest goes, as the
        // engine's own tail would have left it out.
        while self.kept.len() > self.max_lines {
            if let Some(old) = self.kept.pop_front() {
                self.bytes -= cut_len(old.bytes.len());
            }
        }
        // Over the byte budget: a cut the caller is told of.
        while self.bytes > self.max_bytes {
            match self.kept.pop_front() {
                Some(old) => self.bytes -= cut_len(old.bytes.len()),
                None => break,
            }
            self.truncated = true;
        }
    }

    /// The lines, oldest first (an unfinished last line included), and
    /// whether anything was cut or dropped.
    pub(super) fn finish(mut self) -> (Vec<RawLogLine>, bool) {
        for (slot, stream) in [LogStream::Stdout, LogStream::Stderr]
            .into_iter()
            .enumerate()
        {
            let (time, buf) = std::mem::take(&mut self.pending[slot]);
            if !buf.is_empty() {
                self.keep(stream, buf, time);
            }
        }
        let mut truncated = self.truncated;
        let lines = self
            .kept
            .into_iter()
            .map(|l| {
                let (bytes, redactions) = cut_long_line(l.bytes, &mut truncated);
                RawLogLine {
                    bytes,
                    redactions,
                    ..l
                }
            })
            .collect();
        (lines, truncated)
    }
}

impl DockerAdapter {
    /// The last `tail` lines (before `until`, after `since`), the newest
    /// kept within `max_bytes` as they stream in, so a container with huge
    /// lines cannot exhaust the executor's memory.
    pub async fn logs(
        &self,
        permit: &Permit<Read>,
        query: LogQuery,
        max_bytes: usize,
    ) -> Result<(Vec<RawLogLine>, bool), DockerError> {
        let id = permit.container_id();
        self.read("logs", self.timeouts.logs, || async move {
            // The engine API's times are 32-bit in bollard; a time past
            // 2038 asks for nothing yet (since) or for everything (until).
            let until = match query.until {
                0 => 0,
                // The engine's `until` is exclusive and in whole seconds:
                // the next second keeps the lines of this one.
                t => i32::try_from(t.saturating_add(1)).unwrap_or(0),
            };
            // The engine takes its `tail` from the end of the whole log
            // before it looks at `until` (Docker 20.10's json-file and
            // local drivers): the last lines before a moment would be
            // lost behind what came after it. So with `until` the engine
            // sends every line of the window (the service bounds it to a
            // day) and the tail is kept here. Not for a TTY: bollard holds
            // its raw stream until a newline comes, so a window of output
            // without one would be held whole; there the engine's tail
            // applies first.
            let tail = if until != 0 && query.timestamps {
                "all".to_string()
            } else {
                query.tail.to_string()
            };
            let mut stream = self.client().logs(
                id,
                Some(LogsOptions {
                    stdout: query.stdout,
                    stderr: query.stderr,
                    since: i32::try_from(query.since).unwrap_or(i32::MAX),
                    until,
                    timestamps: query.timestamps,
                    tail,
                    ..Default::default()
                }),
            );
            let mut lines = LineJoiner::new(query.tail as usize, max_bytes, query.timestamps);
            while let Some(item) = stream.next().await {
                let (stream_kind, message) = match item.map_err(|e| classify("logs", id, e))? {
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        (LogStream::Stdout, message)
                    }
                    LogOutput::StdErr { message } => (LogStream::Stderr, message),
                    LogOutput::StdIn { .. } => continue,
                };
                lines.push(stream_kind, &message);
            }
            Ok(lines.finish())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_redacted_whole_before_it_is_cut() {
        // The key straddles the 16 KiB cut: cutting first would leave
        // `AKIAIOSFOD`, which no pattern recognises.
        let mut raw = vec![b'x'; MAX_LINE_BYTES - 10];
        raw.extend_from_slice(b" AKIAIOSFODNN7EXAMPLE and more");
        let mut truncated = false;
        let (line, redactions) = cut_long_line(raw, &mut truncated);
        let line = String::from_utf8(line).expect("utf-8");
        assert!(truncated);
        assert_eq!(
            redactions, 1,
            "the redaction made before the cut is counted"
        );
        assert!(!line.contains("AKIAIOSF"), "{}", &line[line.len() - 60..]);
        assert!(line.ends_with(" [line truncated]"));
        assert!(line.len() <= MAX_LINE_BYTES + " [line truncated]".len());
        // Short lines pass untouched (they are shaped later, with the window).
        let mut truncated = false;
        assert_eq!(
            cut_long_line(b"ok\n".to_vec(), &mut truncated),
            (b"ok\n".to_vec(), 0)
        );
        assert!(!truncated);
    }

    #[test]
    fn engine_timestamps_parse_to_unix_nanoseconds() {
        let t = |s: &str| parse_rfc3339_nanos(s);
        assert_eq!(t("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            t("2024-05-01T03:00:12.123456789Z"),
            Some(1_714_532_412_123_456_789)
        );
        // Docker's fixed nine digits, and the trimmed form.
        assert_eq!(
            t("2024-05-01T03:00:12.100000000Z"),
            t("2024-05-01T03:00:12.1Z")
        );
        // An offset: the same instant.
        assert_eq!(
            t("2024-05-01T05:00:12.5+02:00"),
            t("2024-05-01T03:00:12.5Z")
        );
        assert_eq!(t("2024-04-30T23:30:00-03:30"), t("2024-05-01T03:00:00Z"));
        // Leap day, and the turn of a century.
        assert_eq!(t("2024-02-29T00:00:00Z"), Some(1_709_164_800_000_000_000));
        assert_eq!(t("2000-03-01T00:00:00Z"), Some(951_868_800_000_000_000));
        // What humantime agrees on, across many days.
        for day in (0..40_000u64).step_by(97) {
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(day * 86_400 + 3_723);
            let text = humantime::format_rfc3339_nanos(when).to_string();
            assert_eq!(
                t(&text),
                Some((day * 86_400 + 3_723) as i64 * 1_000_000_000),
                "{text}"
            );
        }
        for bad in [
            "",
            "2024-05-01",
            "2024-05-01T03:00:12",
            "2024-05-01 03:00:12Z",
            "2024-13-01T03:00:12Z",
            "2024-05-01T24:00:12Z",
            "2024-05-01T03:00:12.Z",
            "2024-05-01T03:00:12.1234567890Z",
            "2024-05-01T03:00:12+2:00",
            "2024-05-01T03:00:12Zjunk",
            "+024-05-01T03:00:12Z",
            "2024-05-01T03:00:12.123456789Z ",
        ] {
            assert_eq!(t(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_message_loses_its_timestamp_and_a_split_line_keeps_its_first() {
        let mut j = LineJoiner::new(100, 1 << 20, true);
        j.push(
            LogStream::Stdout,
            b"2024-05-01T03:00:12.000000001Z starting\n",
        );
        // One line the engine split in two parts, each with its own time.
        j.push(
            LogStream::Stderr,
            b"2024-05-01T03:00:13.000000000Z panic: first half ",
        );
        j.push(
            LogStream::Stderr,
            b"2024-05-01T03:00:13.500000000Z second half\n",
        );
        // A TTY chunk with two lines: both get the chunk's time.
        j.push(LogStream::Stdout, b"2024-05-01T03:00:14.000000000Z a\nb\n");
        // No timestamp (an engine that ignored the option): kept as it is.
        j.push(LogStream::Stdout, b"plain line\n");
        // A last line without a newline.
        j.push(LogStream::Stdout, b"2024-05-01T03:00:15.000000000Z bye");
        let (lines, truncated) = j.finish();
        assert!(!truncated);
        let got: Vec<(LogStream, &str, i64)> = lines
            .iter()
            .map(|l| {
                (
                    l.stream,
                    std::str::from_utf8(&l.bytes).expect("utf-8"),
                    l.time_nanos,
                )
            })
            .collect();
        let at = |s: &str| parse_rfc3339_nanos(s).expect("time");
        assert_eq!(
            got,
            vec![
                (
                    LogStream::Stdout,
                    "starting\n",
                    at("2024-05-01T03:00:12.000000001Z")
                ),
                (
                    LogStream::Stderr,
                    "panic: first half second half\n",
                    at("2024-05-01T03:00:13Z")
                ),
                (LogStream::Stdout, "a\n", at("2024-05-01T03:00:14Z")),
                (LogStream::Stdout, "b\n", at("2024-05-01T03:00:14Z")),
                (LogStream::Stdout, "plain line\n", 0),
                (LogStream::Stdout, "bye", at("2024-05-01T03:00:15Z")),
            ]
        );
    }

    #[test]
    fn without_timestamps_nothing_is_taken_off_a_line() {
        // A TTY's output that starts like a timestamp is the container's.
        let mut j = LineJoiner::new(100, 1 << 20, false);
        j.push(
            LogStream::Stdout,
            b"2024-05-01T03:00:12Z is when it began\n",
        );
        let (lines, _) = j.finish();
        assert_eq!(lines[0].bytes, b"2024-05-01T03:00:12Z is when it began\n");
        assert_eq!(lines[0].time_nanos, 0);
    }

    #[test]
    fn a_long_line_is_cut_only_if_it_is_kept_and_counts_at_its_cut_length() {
        let long = format!("{} AKIAIOSFODNN7EXAMPLE\n", "x".repeat(MAX_LINE_BYTES));
        let mut j = LineJoiner::new(1, 1 << 20, false);
        j.push(LogStream::Stdout, long.as_bytes());
        j.push(LogStream::Stdout, long.as_bytes());
        let (lines, truncated) = j.finish();
        assert!(truncated, "a cut line is said");
        assert_eq!(lines.len(), 1);
        // Redacted whole before the cut, once: the line dropped for the
        // tail never was.
        assert_eq!(lines[0].redactions, 1);
        assert!(!String::from_utf8_lossy(&lines[0].bytes).contains("AKIA"));
        assert!(lines[0].bytes.ends_with(CUT_MARKER.as_bytes()));
        // Two cut lines fit a budget of two cut lengths, whatever their
        // length as read.
        let mut j = LineJoiner::new(100, 2 * (MAX_LINE_BYTES + CUT_MARKER.len()), false);
        for _ in 0..2 {
            j.push(
                LogStream::Stdout,
                format!("{}\n", "y".repeat(60_000)).as_bytes(),
            );
        }
        let (lines, _) = j.finish();
        assert_eq!(lines.len(), 2);
    }

    #[test]
    fn the_newest_lines_are_kept_within_the_byte_budget() {
        let mut j = LineJoiner::new(100, 10, true);
        for n in 0..5 {
            j.push(
                LogStream::Stdout,
                format!("2024-05-01T03:00:1{n}Z line{n}\n").as_bytes(),
            );
        }
        let (lines, truncated) = j.finish();
        assert!(truncated);
        let texts: Vec<&[u8]> = lines.iter().map(|l| l.bytes.as_slice()).collect();
        assert_eq!(texts, vec![b"line4\n".as_slice()]);
        // And the newest `tail` lines, however short.
        let mut j = LineJoiner::new(2, 1 << 20, true);
        for n in 0..5 {
            j.push(LogStream::Stdout, format!("line{n}\n").as_bytes());
        }
        let (lines, truncated) = j.finish();
        assert!(!truncated, "a tail is what was asked for, not a cut");
        let texts: Vec<&[u8]> = lines.iter().map(|l| l.bytes.as_slice()).collect();
        assert_eq!(texts, vec![b"line3\n".as_slice(), b"line4\n".as_slice()]);
    }
}
