//! A question about what happened ("why did search restart at 3 am?")
//! rather than a report of a fault: whether a message is one, and the
//! moment it asks about, read as the asker's clock shows it.

use std::sync::OnceLock;

use regex::Regex;

/// Is this message a question about what happened rather than a report of
/// a fault? A question gets an answer from the evidence, not a plan.
pub fn is_question(message: &str) -> bool {
    let first = message
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        first.trim_matches(|c: char| !c.is_ascii_alphabetic()),
        "why" | "when" | "what" | "how" | "who" | "did" | "was" | "were" | "has" | "have"
    )
}

/// Does the message ask for an update ("update the api", "upgrade search
/// to the new image")? Then the plan is the update, not a repair.
pub fn asks_for_update(message: &str) -> bool {
    let first = message
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        first.trim_matches(|c: char| !c.is_ascii_alphabetic()),
        "update" | "upgrade"
    ) && !message.trim_end().ends_with('?')
}

/// Does the message ask for a build ("rebuild the api", "rebuild the api
/// at 9c2d1e0")? Then the revision it names, if
/// any.
pub fn asks_for_build(message: &str) -> Option<drydock_vocab::BuildOptions> {
    if message.trim_end().ends_with('?') {
        return None;
    }
    let words: Vec<&str> = message.split_whitespace().collect();
    let first = words.first()?.to_ascii_lowercase();
    if !matches!(
        first.trim_matches(|c: char| !c.is_ascii_alphabetic()),
        "rebuild" | "build"
    ) {
        return None;
    }
    let at = words
        .windows(2)
        .find(|w| w[0].eq_ignore_ascii_case("at"))
        .map(|w| w[1].trim_end_matches(['.', ',', '!']).to_string())
        .filter(|r| drydock_proto::approval::is_revision(r))
        .unwrap_or_default();
    Some(drydock_vocab::BuildOptions { at })
}

/// Does the message ask about resource use ("slow", "memory", "cpu")?
/// Then a running container's usage sample can change the answer and is
/// waited for; otherwise it is not on the critical path.
pub fn asks_about_usage(message: &str) -> bool {
    const WORDS: &[&str] = &[
        "slow",
        "sluggish",
        "lag",
        "laggy",
        "latency",
        "memory",
        "mem",
        "ram",
        "cpu",
        "load",
        "leak",
        "leaking",
        "oom",
        "swap",
        "usage",
        "resources",
        "throttled",
        "throttling",
    ];
    message
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| WORDS.contains(&w.to_lowercase().as_str()))
}

/// The widest offset from UTC a clock can have (UTC−12 to UTC+14, with
/// room): what the API accepts.
pub const MAX_UTC_OFFSET_MINUTES: i32 = 18 * 60;

/// A time of day named in a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AskedTime {
    /// The latest such moment not after now (on the day before for
    /// "yesterday"), in unix seconds.
    pub unix: i64,
    /// Minutes after midnight on the asker's clock.
    pub minute_of_day: u32,
    pub utc_offset_minutes: i32,
}

impl AskedTime {
    /// `03:00 UTC`, or `03:00 at UTC+01:00 (02:00 UTC)` on another clock.
    pub fn said(&self) -> String {
        let hm = |m: i64| format!("{:02}:{:02}", m.rem_euclid(1440) / 60, m.rem_euclid(60));
        let local = i64::from(self.minute_of_day);
        if self.utc_offset_minutes == 0 {
            return format!("{} UTC", hm(local));
        }
        let off = self.utc_offset_minutes;
        format!(
            "{} at UTC{}{:02}:{:02} ({} UTC)",
            hm(local),
            if off < 0 { '-' } else { '+' },
            off.unsigned_abs() / 60,
            off.unsigned_abs() % 60,
            hm(local - i64::from(off))
        )
    }
}

fn time_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // `3 am`, `3am`, `3:15 pm`, `3 a.m.`; `03:00`, `15:30` (24 hours);
        // noon and midnight. A bare `at 3` is left alone: it may be a count.
        Regex::new(
            r"(?i)\b(?:(?P<h12>1[0-2]|0?[1-9])(?::(?P<m12>[0-5]\d))?\s*(?P<ampm>a\.?m\.?|p\.?m\.?)(?:\s|$|[^a-z])|(?P<h24>[01]?\d|2[0-3]):(?P<m24>[0-5]\d)\b|(?P<word>noon|midnight)\b)",
        )
        .unwrap_or_else(|e| unreachable!("the time pattern compiles: {e}"))
    })
}

/// The moment a question names, if it names a time of day: the latest such
/// time on the asker's clock that is not after now, or on the day before
/// when it says "yesterday".
pub fn asked_time(message: &str, now_unix: i64, utc_offset_minutes: i32) -> Option<AskedTime> {
    let caps = time_pattern().captures(message)?;
    let num = |name: &str| caps.name(name).and_then(|m| m.as_str().parse::<u32>().ok());
    let minute_of_day = if let Some(h) = num("h12") {
        let pm = caps
            .name("ampm")
            .is_some_and(|m| m.as_str().to_ascii_lowercase().starts_with('p'));
        let h = h % 12 + if pm { 12 } else { 0 };
        h * 60 + num("m12").unwrap_or(0)
    } else if let Some(h) = num("h24") {
        h * 60 + num("m24")?
    } else {
        match caps.name("word")?.as_str().to_ascii_lowercase().as_str() {
            "noon" => 12 * 60,
            _ => 0,
        }
    };
    let utc_offset_minutes =
        utc_offset_minutes.clamp(-MAX_UTC_OFFSET_MINUTES, MAX_UTC_OFFSET_MINUTES);
    let offset = i64::from(utc_offset_minutes) * 60;
    let local_now = now_unix + offset;
    let mut local = local_now.div_euclid(86_400) * 86_400 + i64::from(minute_of_day) * 60;
    // "Yesterday" is the day before today on that clock; otherwise a time
    // later today than now is yesterday's.
    if message.to_ascii_lowercase().contains("yesterday") || local > local_now {
        local -= 86_400;
    }
    Some(AskedTime {
        unix: local - offset,
        minute_of_day,
        utc_offset_minutes,
    })
}

/// The time a request's message asks about: only a question names one.
pub fn asked_in(
    message: &str,
    utc_offset_minutes: Option<i32>,
    now_unix: i64,
) -> Option<AskedTime> {
    if !is_question(message) {
        return None;
    }
    asked_time(message, now_unix, utc_offset_minutes.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_words_are_told_from_others() {
        for m in [
            "the api is slow",
            "Web uses too much MEMORY",
            "cpu at 100%?",
            "db: high load",
        ] {
            assert!(asks_about_usage(m), "{m}");
        }
        for m in [
            "web is down",
            "api keeps restarting",
            "slowlog",
            "download fails",
        ] {
            assert!(!asks_about_usage(m), "{m}");
        }
    }

    /// 2026-12-01 09:30:00 UTC.
    const NOW: i64 = 1_796_117_400;

    fn at(message: &str, offset: i32) -> Option<(i64, u32)> {
        asked_time(message, NOW, offset).map(|a| (NOW - a.unix, a.minute_of_day))
    }

    #[test]
    fn times_of_day_in_questions() {
        let h = 3600;
        // Seconds before now, and minute of the day.
        assert_eq!(
            at("why did search restart at 3 am?", 0),
            Some((6 * h + 1800, 180))
        );
        assert_eq!(
            at("why did search restart at 3am", 0),
            Some((6 * h + 1800, 180))
        );
        assert_eq!(
            at("what happened at 3 a.m. to db", 0),
            Some((6 * h + 1800, 180))
        );
        assert_eq!(at("why did it die at 9:15 am", 0), Some((900, 555)));
        assert_eq!(at("why did it die at 09:15?", 0), Some((900, 555)));
        // Later today than now: yesterday's.
        assert_eq!(at("why did it stop at 3 pm", 0), Some((18 * h + 1800, 900)));
        assert_eq!(
            at("why did it stop at 15:00", 0),
            Some((18 * h + 1800, 900))
        );
        assert_eq!(
            at("why did it restart at 12 am", 0),
            Some((9 * h + 1800, 0))
        );
        assert_eq!(
            at("why did it restart at midnight", 0),
            Some((9 * h + 1800, 0))
        );
        assert_eq!(
            at("why did it restart at noon", 0),
            Some((21 * h + 1800, 720))
        );
        assert_eq!(
            at("why did it restart at 12 pm", 0),
            Some((21 * h + 1800, 720))
        );
        assert_eq!(
            at("why did search restart yesterday at 3 am?", 0),
            Some((30 * h + 1800, 180))
        );
        // On a clock at UTC+01:00 it is 10:30: 3 am there is 02:00 UTC.
        assert_eq!(
            at("why did search restart at 3 am?", 60),
            Some((7 * h + 1800, 180))
        );
        // At UTC-05:00 it is 04:30: 3 am there is 08:00 UTC.
        assert_eq!(
            at("why did search restart at 3 am?", -300),
            Some((5400, 180))
        );
        for none in [
            "why did search restart?",
            "why did it restart 3 times",
            "why is db:5432 refusing",
            "why does 10.0.0.5:5432 refuse",
            "why did it restart at 25:00",
            "why did it restart at 13 pm",
            "why is v1.2 broken",
        ] {
            assert_eq!(at(none, 0), None, "{none}");
        }
    }

    #[test]
    fn the_asked_time_is_said_on_both_clocks() {
        let a = asked_time("at 3 am", NOW, 60).expect("time");
        assert_eq!(a.said(), "03:00 at UTC+01:00 (02:00 UTC)");
        let a = asked_time("at 1:30 am", NOW, -330).expect("time");
        assert_eq!(a.said(), "01:30 at UTC-05:30 (07:00 UTC)");
        let a = asked_time("at 3 am", NOW, 0).expect("time");
        assert_eq!(a.said(), "03:00 UTC");
        // Only a question asks about a time.
        assert_eq!(asked_in("db is down since 3 am", Some(60), NOW), None);
        assert_eq!(
            asked_in("why is db down since 3 am", Some(60), NOW),
            asked_time("why is db down since 3 am", NOW, 60)
        );
        // An offset past any clock's is read, and said, as the widest.
        let a = asked_time("at 3 am", NOW, i32::MIN).expect("time");
        assert_eq!(a.utc_offset_minutes, -MAX_UTC_OFFSET_MINUTES);
        assert_eq!(a.said(), "03:00 at UTC-18:00 (21:00 UTC)");
    }

    #[test]
    fn an_update_is_asked_for_by_its_first_word() {
        for yes in [
            "update the api",
            "Upgrade search to the new image",
            "update: shop-web",
        ] {
            assert!(asks_for_update(yes), "{yes}");
        }
        for no in [
            "the api is down after an update",
            "update the api?",
            "why did the update break the api",
            "updated the api and now it fails",
        ] {
            assert!(!asks_for_update(no), "{no}");
        }
    }
}
