//! Evidence compaction: what a tool answers is cut down before the model
//! sees it. Repeated lines (equal once digits are masked) collapse into one
//! with a count; error lines are kept with their neighbours; the first and
//! last lines are kept for orientation; the rest is counted, not shown; and
//! every answer has a hard size cap.

use std::collections::HashMap;

/// Cap on one tool answer, in characters (about 3,000 tokens).
pub const MAX_TOOL_CHARS: usize = 12_000;
const HEAD_LINES: usize = 5;
const TAIL_LINES: usize = 40;
const NEIGHBOURS: usize = 2;
const MAX_LINE_CHARS: usize = 400;

fn is_error(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "error",
        "fatal",
        "panic",
        "exception",
        "traceback",
        "refused",
        "denied",
        "killed",
        "out of memory",
        "oom",
        "fail",
        "timed out",
        "timeout",
        "cannot",
        "unable",
        "no such",
        "not found",
        "in use",
        "segmentation",
        "critical",
        "warn",
    ]
    .iter()
    .any(|k| l.contains(k))
}

/// The line with digit runs masked: `GET /x 200 12ms` and `GET /x 200 9ms`
/// are the same line for counting.
fn shape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

fn clip(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        line.to_string()
    } else {
        let head: String = line.chars().take(MAX_LINE_CHARS).collect();
        format!("{head}… [line cut]")
    }
}

fn again(n: usize) -> String {
    if n == 1 {
        "[… the line above once more]".to_string()
    } else {
        format!("[… the line above {n} more times]")
    }
}

/// Compact log lines for the model.
pub fn logs(lines: &[String]) -> String {
    let n = lines.len();
    let shapes: Vec<String> = lines.iter().map(|l| shape(l)).collect();
    // Per shape: how many, first and last line number.
    let mut seen: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    for (i, s) in shapes.iter().enumerate() {
        let e = seen.entry(s.as_str()).or_insert((0, i, i));
        e.0 += 1;
        e.2 = i;
    }
    let mut keep = vec![false; n];
    for (i, k) in keep.iter_mut().enumerate() {
        *k = i < HEAD_LINES || i + TAIL_LINES >= n;
    }
    for (i, line) in lines.iter().enumerate() {
        if is_error(line) {
            let lo = i.saturating_sub(NEIGHBOURS);
            let hi = (i + NEIGHBOURS).min(n.saturating_sub(1));
            for k in &mut keep[lo..=hi] {
                *k = true;
            }
        }
    }
    let mut out = Vec::new();
    let mut shown: HashMap<&str, ()> = HashMap::new();
    let mut omitted = 0usize;
    let mut repeats = 0usize;
    let mut previous: Option<&str> = None;
    for (i, line) in lines.iter().enumerate() {
        let s = shapes[i].as_str();
        // The tail is shown as it happened (only back-to-back repeats
        // collapse): it is what the container is doing now.
        let in_tail = i + TAIL_LINES >= n;
        if !keep[i] || (!in_tail && shown.contains_key(s)) {
            omitted += 1;
            continue;
        }
        if in_tail && previous == Some(s) {
            repeats += 1;
            continue;
        }
        if repeats > 0 {
            out.push(again(repeats));
            repeats = 0;
        }
        if omitted > 0 {
            out.push(format!("[… {omitted} lines omitted]"));
            omitted = 0;
        }
        previous = Some(s);
        if shown.insert(s, ()).is_some() {
            out.push(clip(line));
            continue;
        }
        match seen.get(s).copied().unwrap_or((1, i, i)) {
            (1, _, _) => out.push(clip(line)),
            (c, first, last) => out.push(format!(
                "[×{c} like this, lines {}-{}] {}",
                first + 1,
                last + 1,
                clip(line)
            )),
        }
    }
    if repeats > 0 {
        out.push(again(repeats));
    }
    if omitted > 0 {
        out.push(format!("[… {omitted} lines omitted]"));
    }
    let header =
        format!("{n} lines; lines equal but for their numbers are shown once with [×count]");
    cap(&format!("{header}\n{}", out.join("\n")), MAX_TOOL_CHARS)
}

/// Keep at most `max` characters: a quarter from the start, the rest from
/// the end (where the newest, usually most telling, lines are).
pub fn cap(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let head_n = max / 4;
    let tail_n = max - head_n;
    let head: String = text.chars().take(head_n).collect();
    let tail: String = text.chars().skip(total - tail_n).collect();
    format!(
        "{head}\n[… {} characters cut to fit the budget …]\n{tail}",
        total - head_n - tail_n
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_lines_collapse_and_errors_stay_with_neighbours() {
        let mut lines: Vec<String> = (0..1000)
            .map(|i| format!("GET /health 200 {i}ms"))
            .collect();
        lines[500] = "connecting to db:5432".into();
        lines[501] = "ERROR: connection refused db:5432".into();
        let out = logs(&lines);
        assert!(
            out.contains("[×998 like this, lines 1-1000] GET /health 200 0ms"),
            "{out}"
        );
        assert!(out.contains("connecting to db:5432"));
        assert!(out.contains("ERROR: connection refused"));
        assert!(out.len() < 2000, "{}", out.len());
    }

    #[test]
    fn cap_keeps_both_ends() {
        let t = "a".repeat(100) + &"z".repeat(100);
        let c = cap(&t, 40);
        assert!(c.starts_with("aaaaaaaaaa") && c.ends_with("zzzzzzzzzz"));
    }
}
