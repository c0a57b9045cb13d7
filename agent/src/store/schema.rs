//! The agent store's schema, as a list of migrations. The file's
//! `user_version` says how many have run; opening a store runs the rest in
//! one transaction, and refuses a file a newer release made (its tables may
//! mean something this release does not know).
//!
//! To change the schema, append a migration; never edit one that shipped.

/// Migration `i` takes a store from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: requests and their events, automation grants, the watcher's
    // journal of container events, and webhook deliveries. A store of the
    // release before versions existed (version 0) has these tables
    // already; `IF NOT EXISTS` keeps its rows.
    "CREATE TABLE IF NOT EXISTS requests (
       id TEXT PRIMARY KEY,
       created_at TEXT NOT NULL,
       status TEXT NOT NULL,
       doc TEXT NOT NULL
     );
     CREATE TABLE IF NOT EXISTS events (
       seq INTEGER PRIMARY KEY AUTOINCREMENT,
       request_id TEXT NOT NULL,
       ts TEXT NOT NULL,
       kind TEXT NOT NULL,
       data TEXT NOT NULL
     );
     CREATE INDEX IF NOT EXISTS events_by_request ON events(request_id, seq);
     CREATE TABLE IF NOT EXISTS grants (
       id TEXT PRIMARY KEY,
       claims TEXT NOT NULL,
       signature TEXT NOT NULL,
       key_id TEXT NOT NULL,
       created_at TEXT NOT NULL,
       revoked_at TEXT
     );
     CREATE TABLE IF NOT EXISTS journal (
       time_nanos INTEGER NOT NULL,
       container_id TEXT NOT NULL,
       name TEXT NOT NULL,
       action TEXT NOT NULL,
       exit_code INTEGER,
       signal TEXT NOT NULL,
       health TEXT NOT NULL,
       image TEXT NOT NULL,
       project TEXT NOT NULL,
       service TEXT NOT NULL,
       trigger TEXT NOT NULL DEFAULT '',
       PRIMARY KEY (time_nanos, container_id, action, health)
     );
     CREATE INDEX IF NOT EXISTS journal_by_container ON journal (container_id, time_nanos);
     CREATE INDEX IF NOT EXISTS journal_by_trigger ON journal (trigger);
     CREATE TABLE IF NOT EXISTS deliveries (
       id INTEGER PRIMARY KEY AUTOINCREMENT,
       webhook TEXT NOT NULL,
       event TEXT NOT NULL,
       request_id TEXT NOT NULL,
       body TEXT NOT NULL,
       status TEXT NOT NULL,
       attempts INTEGER NOT NULL DEFAULT 0,
       next_at INTEGER NOT NULL,
       last_error TEXT NOT NULL DEFAULT '',
       created_at TEXT NOT NULL,
       delivered_at TEXT
     );
     CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_at);",
    // 2: what each container was (its fingerprint), to name what changed
    // before a failure.
    "CREATE TABLE fingerprints (
       container_id TEXT PRIMARY KEY,
       name TEXT NOT NULL,
       project TEXT NOT NULL,
       service TEXT NOT NULL,
       doc TEXT NOT NULL,
       first_seen INTEGER NOT NULL,
       last_seen INTEGER NOT NULL,
       failed_at INTEGER
     );
     CREATE INDEX fingerprints_by_service ON fingerprints (project, service, last_seen);
     CREATE INDEX fingerprints_by_name ON fingerprints (name, last_seen);",
    // 3: the host each journaled event happened on ('' for a lone
    // executor), so each host's watch resumes from its own newest event.
    "ALTER TABLE journal ADD COLUMN host TEXT NOT NULL DEFAULT '';
     CREATE INDEX journal_by_host ON journal (host, time_nanos);",
    // 4: the host each remembered container is on: another host's
    // container of the same service is not its predecessor.
    "ALTER TABLE fingerprints ADD COLUMN host TEXT NOT NULL DEFAULT '';",
    // 5: operators' notes on a container or service, and schedules of
    // diagnose-only looks with the answer each last gave.
    "CREATE TABLE notes (
       id TEXT PRIMARY KEY,
       target TEXT NOT NULL,
       text TEXT NOT NULL,
       created_at TEXT NOT NULL,
       created_unix INTEGER NOT NULL
     );
     CREATE INDEX notes_by_target ON notes (target, created_unix);
     CREATE TABLE schedules (
       id TEXT PRIMARY KEY,
       message TEXT NOT NULL,
       every_secs INTEGER NOT NULL,
       host TEXT,
       created_at TEXT NOT NULL,
       last_run_unix INTEGER,
       last_request_id TEXT,
       last_verdict TEXT
     );",
    // 6: updates found: per container, the registry's digest for its tag
    // when it differs from the image it runs, and when it was first seen
    // (a digest seen before is not news again).
    "CREATE TABLE updates (
       host TEXT NOT NULL,
       container TEXT NOT NULL,
       container_id TEXT NOT NULL,
       reference TEXT NOT NULL,
       image_id TEXT NOT NULL,
       version TEXT,
       revision TEXT,
       registry_digest TEXT NOT NULL,
       found_at TEXT NOT NULL,
       checked_at TEXT NOT NULL,
       PRIMARY KEY (host, container)
     );",
    // 7: the new image's version and revision, read from its config in
    // the registry before any pull, or why they could not be read; the
    // compose service, for the commits between the revisions.
    "ALTER TABLE updates ADD COLUMN new_version TEXT;
     ALTER TABLE updates ADD COLUMN new_revision TEXT;
     ALTER TABLE updates ADD COLUMN labels_unread TEXT;
     ALTER TABLE updates ADD COLUMN service TEXT;
     ALTER TABLE updates ADD COLUMN new_tag TEXT;",
];

/// The version this release writes.
pub fn current() -> u32 {
    MIGRATIONS.len() as u32
}
