//! The words of a message that can name a container, and how close a
//! word is to a name.

const STOPWORDS: &[&str] = &[
    "the",
    // Every container here runs on Docker: "the docker ones run fine".
    "docker",
    "is",
    "are",
    "was",
    "down",
    "broken",
    "not",
    "working",
    "why",
    "what",
    "my",
    "our",
    "container",
    "service",
    "app",
    "please",
    "fix",
    "check",
    "and",
    "with",
    "failing",
    "fails",
    "failed",
    "dead",
    "crashed",
    "crashing",
    "unhealthy",
    "again",
    "it",
    "its",
    "this",
    "that",
    "does",
    "doesn",
    "won",
    "start",
    "can",
    "cannot",
    "keeps",
    "restarting",
    "help",
    "look",
    "at",
    "on",
    "in",
    "of",
    "for",
    "to",
    "a",
    "an",
    "up",
    // Words that describe a state, not a container (`described` reads them).
    "slow",
    "stuck",
    "hangs",
    "hanging",
    "died",
    "dies",
    "dying",
    "exited",
    "crashes",
    "responding",
    "unresponsive",
    "loop",
    "timing",
    "times",
    "out",
    "healthy",
    "health",
    "healthcheck",
    "come",
    "boot",
    "never",
    "will",
    "wont",
    "doesnt",
    "starting",
    "restart",
    "flapping",
];

/// The words of a message that can name a container, and each adjacent
/// pair joined (`web server` → `web-server`, `webserver`). Anything that is
/// not ASCII letters, digits, `-`, `_` or `.` separates words.
pub(super) fn words(message: &str) -> Vec<String> {
    let plain: Vec<String> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .map(|w| {
            w.trim_matches(|c: char| c == '.' || c == '-')
                .to_ascii_lowercase()
        })
        .filter(|w| w.len() >= 2)
        .collect();
    let mut out: Vec<String> = plain
        .iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .cloned()
        .collect();
    // A dotted word is also its parts (`git.shop` → `git`, `shop`).
    for w in &plain {
        if w.contains('.') {
            out.extend(
                w.split('.')
                    .filter(|p| p.len() >= 2 && !STOPWORDS.contains(p))
                    .map(str::to_string),
            );
        }
    }
    for pair in plain.windows(2) {
        if pair.iter().all(|w| w.len() >= 2)
            && pair.iter().any(|w| !STOPWORDS.contains(&w.as_str()))
        {
            out.push(format!("{}-{}", pair[0], pair[1]));
            out.push(format!("{}{}", pair[0], pair[1]));
        }
    }
    out
}

/// Damerau-Levenshtein distance (adjacent transpositions), for typos.
pub(super) fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// Edits a word of this length may be away from a name and still be a typo.
pub(super) fn typo_budget(len: usize) -> usize {
    match len {
        0..=3 => 0,
        4..=6 => 1,
        _ => 2,
    }
}

/// The image's base name: `docker.io/library/postgres:16` → `postgres`.
pub(super) fn image_base(image: &str) -> String {
    let image = image.to_ascii_lowercase();
    image
        .rsplit('/')
        .next()
        .unwrap_or(&image)
        .split(['@', ':'])
        .next()
        .unwrap_or("")
        .to_string()
}
