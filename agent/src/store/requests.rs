//! Requests and their durable event log.

use rusqlite::{params, OptionalExtension as _};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::{Store, StoreError};
use crate::model::{
    now_rfc3339, Event, EventPayload, Request, RequestOptions, RequestSource, Status, Target,
};

/// What a request is about and where it stands, without its evidence,
/// plan or timeline: read from the same document, for the callers that
/// look at many requests and need only this (whether an automatic request
/// is already open for a container, say).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct RequestHead {
    pub id: String,
    pub message: String,
    #[serde(default)]
    pub source: RequestSource,
    pub status: Status,
    pub created_at: String,
    pub updated_at: String,
    pub options: RequestOptions,
    pub target: Option<Target>,
}

impl RequestHead {
    /// The host it is on, as `Request::host` says.
    pub fn host(&self) -> Option<&str> {
        crate::model::request_host(self.target.as_ref(), &self.options)
    }
}

/// What `read` hands over, one at a time, gathered.
fn collected<T>(
    read: impl FnOnce(&mut dyn FnMut(T) -> Result<(), StoreError>) -> Result<(), StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut all = Vec::new();
    read(&mut |item| {
        all.push(item);
        Ok(())
    })?;
    Ok(all)
}

/// Decode each row's document as it is read, so only one is held at a time.
fn each_doc<T: DeserializeOwned>(
    mut rows: rusqlite::Rows<'_>,
    mut each: impl FnMut(T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    while let Some(row) = rows.next()? {
        let doc = row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
        each(serde_json::from_str(doc)?)?;
    }
    Ok(())
}

impl Store {
    /// Save the request and append one event, atomically.
    pub fn save(&self, request: &Request, payload: EventPayload) -> Result<Event, StoreError> {
        let mut events = self.save_events(request, vec![payload])?;
        events
            .pop()
            .ok_or_else(|| StoreError::Corrupt(serde::de::Error::custom("no event was saved")))
    }

    /// Save the request and append its events, in one transaction: a phase
    /// that gathered several pieces of evidence writes them together.
    pub fn save_events(
        &self,
        request: &Request,
        events: Vec<EventPayload>,
    ) -> Result<Vec<Event>, StoreError> {
        let doc = serde_json::to_string(request)?;
        let ts = now_rfc3339();
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO requests (id, created_at, status, doc) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(id) DO UPDATE SET status = excluded.status, doc = excluded.doc",
            params![request.id, request.created_at, request.status.as_str(), doc],
        )?;
        let mut saved = Vec::with_capacity(events.len());
        for payload in events {
            tx.execute(
                "INSERT INTO events (request_id, ts, kind, data) VALUES (?1, ?2, ?3, ?4)",
                params![
                    request.id,
                    ts,
                    payload.kind().as_str(),
                    payload.data()?.to_string()
                ],
            )?;
            saved.push(Event {
                seq: tx.last_insert_rowid(),
                request_id: request.id.clone(),
                ts: ts.clone(),
                payload,
            });
        }
        tx.commit()?;
        Ok(saved)
    }

    pub fn get(&self, id: &str) -> Result<Option<Request>, StoreError> {
        let doc: Option<String> = self
            .lock()
            .query_row("SELECT doc FROM requests WHERE id = ?1", params![id], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(match doc {
            Some(d) => Some(serde_json::from_str(&d)?),
            None => None,
        })
    }

    /// The newest requests (at most `limit`) whose document contains
    /// `needle`: a search for an id or a digest, which the callers check to
    /// be hex first, so nothing in it means something to LIKE.
    fn containing(&self, needle: &str, limit: u32) -> Result<Vec<Request>, StoreError> {
        let docs: Vec<String> = self
            .lock()
            .prepare_cached(
                "SELECT doc FROM requests WHERE doc LIKE ?1 ORDER BY created_at DESC LIMIT ?2",
            )?
            .query_map(params![format!("%{needle}%"), limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        docs.iter()
            .map(|d| serde_json::from_str(d).map_err(StoreError::from))
            .collect()
    }

    /// The request whose write (an update or a rollback) made the container
    /// `container_id`, the newest first: its id and the write's action.
    pub fn made_container(
        &self,
        container_id: &str,
    ) -> Result<Option<(String, crate::model::WriteAction)>, StoreError> {
        if !is_hex(container_id) {
            return Ok(None);
        }
        let needle = format!("\"new_container_id\":\"{container_id}\"");
        Ok(self.containing(&needle, 5)?.into_iter().find_map(|req| {
            req.execution
                .iter()
                .find(|e| e.ok && e.new_container_id.as_deref() == Some(container_id))
                .map(|e| (req.id.clone(), e.action))
        }))
    }

    /// Whether the update checker opened a request for the update of
    /// `container_id` to `digest` (its message names the digest), at any
    /// time: each digest is tried once per container, across restarts.
    pub fn update_opened(&self, container_id: &str, digest: &str) -> Result<bool, StoreError> {
        let digest_hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if !is_hex(container_id) || !is_hex(digest_hex) {
            return Ok(false);
        }
        Ok(self.containing(digest, 1000)?.iter().any(|req| {
            req.source == crate::model::RequestSource::Update
                && req.options.container.as_deref() == Some(container_id)
                && req.message.contains(digest)
        }))
    }

    /// Where a request stands, from its status column alone (`None`: no
    /// such request): what a worker checks between steps, without reading
    /// its document.
    pub fn status(&self, id: &str) -> Result<Option<Status>, StoreError> {
        let status: Option<String> = self
            .lock()
            .prepare_cached("SELECT status FROM requests WHERE id = ?1")?
            .query_row(params![id], |r| r.get(0))
            .optional()?;
        status
            .map(|s| {
                Status::parse(&s).ok_or_else(|| {
                    StoreError::Corrupt(serde::de::Error::custom(format!(
                        "request {id} has the unknown status `{s}`"
                    )))
                })
            })
            .transpose()
    }

    /// Newest first, optionally only one status.
    pub fn list(&self, status: Option<Status>, limit: u32) -> Result<Vec<Request>, StoreError> {
        self.list_on(status, None, limit)
    }

    /// The newest requests, optionally only those in one state, or on one
    /// host (its target's, else the one it was asked about).
    pub fn list_on(
        &self,
        status: Option<Status>,
        host: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Request>, StoreError> {
        collected(|push| self.each_on(status, host, limit, push))
    }

    /// `list_on`, one request at a time: an answer built from many
    /// requests never holds all their documents at once.
    pub fn each_on<T: DeserializeOwned>(
        &self,
        status: Option<Status>,
        host: Option<&str>,
        limit: u32,
        each: impl FnMut(T) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT doc FROM requests WHERE (?1 IS NULL OR status = ?1)
               AND (?2 IS NULL OR coalesce(json_extract(doc, '$.target.host'), json_extract(doc, '$.options.host')) = ?2)
             ORDER BY created_at DESC LIMIT ?3",
        )?;
        each_doc(
            stmt.query(params![status.map(Status::as_str), host, limit])?,
            each,
        )?;
        Ok(())
    }

    /// The heads of the newest `limit` requests, finished or not.
    pub fn heads(&self, limit: u32) -> Result<Vec<RequestHead>, StoreError> {
        collected(|push| self.each_on(None, None, limit, push))
    }

    /// How many requests are in each state, by SQL: the metrics read no
    /// document.
    pub fn count_by_status(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT status, count(*) FROM requests GROUP BY status ORDER BY status",
        )?;
        let counts = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(counts)
    }

    /// The newest requests other than `except` whose target was the
    /// container or service `name` on `host` (`None`: a lone executor).
    pub fn about_target(
        &self,
        name: &str,
        host: Option<&str>,
        except: &str,
        limit: u32,
    ) -> Result<Vec<Request>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT doc FROM requests WHERE id != ?1
               AND json_extract(doc, '$.target.container_name') = ?2
               AND coalesce(json_extract(doc, '$.target.host'), '') = ?3
             ORDER BY created_at DESC LIMIT ?4",
        )?;
        let rows = stmt.query(params![except, name, host.unwrap_or(""), limit])?;
        collected(|push| each_doc(rows, push))
    }

    pub fn unfinished(&self) -> Result<Vec<Request>, StoreError> {
        self.unfinished_as()
    }

    /// The unfinished requests, oldest first, as whole requests or heads.
    pub fn unfinished_as<T: DeserializeOwned>(&self) -> Result<Vec<T>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT doc FROM requests WHERE status NOT IN ({}) ORDER BY created_at",
            terminal_list()
        ))?;
        let rows = stmt.query([])?;
        collected(|push| each_doc(rows, push))
    }

    /// Forget finished requests created before `before` (RFC 3339, as
    /// `created_at` is written) and all but the newest `keep` finished
    /// ones, with their events, in one transaction. A request that has not
    /// finished is never forgotten, however old. Returns how many went.
    pub fn prune_finished(&self, before: &str, keep: u32) -> Result<usize, StoreError> {
        let terminal = terminal_list();
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let ids = {
            let mut stmt = tx.prepare(&format!(
                "SELECT id FROM requests WHERE status IN ({terminal}) AND (created_at < ?1
                   OR id NOT IN (SELECT id FROM requests WHERE status IN ({terminal})
                                 ORDER BY created_at DESC LIMIT ?2))"
            ))?;
            let ids = stmt
                .query_map(params![before, keep], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            ids
        };
        forget(&tx, &ids)?;
        tx.commit()?;
        Ok(ids.len())
    }

    /// Forget the finished runs of a schedule (requests with `source:
    /// schedule` and its message) but the newest `keep`, with their events:
    /// a schedule every 10 s would otherwise fill the store and push the
    /// requests people asked out of `prune_finished`'s count.
    pub fn prune_runs(&self, message: &str, keep: u32) -> Result<usize, StoreError> {
        let terminal = terminal_list();
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let ids = {
            let mut stmt = tx.prepare(&format!(
                "SELECT id FROM requests WHERE status IN ({terminal})
                   AND json_extract(doc, '$.source') = 'schedule'
                   AND json_extract(doc, '$.message') = ?1
                 ORDER BY created_at DESC LIMIT -1 OFFSET ?2"
            ))?;
            let ids = stmt
                .query_map(params![message, keep], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            ids
        };
        forget(&tx, &ids)?;
        tx.commit()?;
        Ok(ids.len())
    }

    /// Events of one request after `after_seq`, in order.
    pub fn events_after(&self, request_id: &str, after_seq: i64) -> Result<Vec<Event>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT seq, request_id, ts, kind, data FROM events WHERE request_id = ?1 AND seq > ?2 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map(params![request_id, after_seq], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(seq, request_id, ts, kind, data)| {
                Ok(Event {
                    seq,
                    request_id,
                    ts,
                    payload: EventPayload::from_parts(&kind, serde_json::from_str(&data)?)?,
                })
            })
            .collect()
    }
}

/// The final states, as an SQL list (`'completed','failed',...`).
/// Delete requests and their events (inside the caller's transaction).
fn forget(tx: &rusqlite::Transaction<'_>, ids: &[String]) -> Result<(), StoreError> {
    for id in ids {
        tx.execute("DELETE FROM events WHERE request_id = ?1", params![id])?;
        tx.execute("DELETE FROM requests WHERE id = ?1", params![id])?;
    }
    Ok(())
}

fn terminal_list() -> String {
    Status::terminal()
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Hex digits, at least one: an id or a digest's hex, safe in a LIKE.
fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventKind, EvidenceAdded, RequestOptions, Status, StatusChanged, Target};
    use crate::store::Store;

    fn request(id: &str) -> Request {
        Request::new(
            id.into(),
            "m".into(),
            RequestOptions::default(),
            Default::default(),
            now_rfc3339(),
        )
    }

    fn created() -> EventPayload {
        EventPayload::Created(crate::model::Created {
            message: "m".into(),
            options: RequestOptions::default(),
            source: Default::default(),
        })
    }

    fn status(status: Status) -> EventPayload {
        EventPayload::Status(StatusChanged {
            status,
            message: String::new(),
        })
    }

    fn evidence(kind: &str) -> EventPayload {
        EventPayload::Evidence(EvidenceAdded {
            id: format!("ev-{kind}"),
            kind: kind.into(),
            source: "test".into(),
            summary: String::new(),
        })
    }

    #[test]
    fn a_schedules_old_runs_go_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let save = |id: &str, second: u32, message: &str, source, status| {
            let mut r = Request::new(
                id.into(),
                message.into(),
                RequestOptions::default(),
                source,
                format!("2026-12-04T00:00:{second:02}.000Z"),
            );
            r.status = status;
            store.save(&r, created()).unwrap();
        };
        use crate::model::RequestSource::{Ask, Schedule};
        for i in 0..5 {
            save(
                &format!("run{i}"),
                i,
                "is it ok?",
                Schedule,
                Status::Completed,
            );
        }
        save("running", 0, "is it ok?", Schedule, Status::Diagnosing);
        save("other", 0, "is the db ok?", Schedule, Status::Completed);
        save("asked", 0, "is it ok?", Ask, Status::Completed);
        assert_eq!(store.prune_runs("is it ok?", 2).unwrap(), 3);
        let left: Vec<String> = store
            .list(None, 100)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        for kept in ["run3", "run4", "running", "other", "asked"] {
            assert!(left.iter().any(|id| id == kept), "{kept} kept: {left:?}");
        }
        assert!(store.events_after("run0", 0).unwrap().is_empty());
    }

    #[test]
    fn heads_and_counts_agree_with_the_whole_requests() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        for (i, st) in [
            Status::Completed,
            Status::WaitingApproval,
            Status::Completed,
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = Request::new(
                format!("r{i}"),
                format!("web {i} is down"),
                RequestOptions {
                    host: Some("edge".into()),
                    ..Default::default()
                },
                crate::model::RequestSource::Watch,
                format!("2026-12-04T00:00:0{i}.000Z"),
            );
            r.status = st;
            r.target = Some(Target::container(
                format!("c{i}"),
                format!("web-{i}"),
                None,
                None,
            ));
            r.evidence.push(crate::model::Evidence {
                id: "ev-logs".into(),
                source: "test".into(),
                timestamp: now_rfc3339(),
                payload: crate::model::EvidencePayload::Other {
                    kind: "logs".into(),
                    data: serde_json::json!({ "lines": vec!["x".repeat(100); 200] }),
                },
            });
            store.save(&r, created()).unwrap();
        }
        let whole = store.list(None, 10).unwrap();
        let heads = store.heads(10).unwrap();
        assert_eq!(
            whole.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["r2", "r1", "r0"],
            "newest first"
        );
        assert_eq!(heads.len(), whole.len());
        for (h, r) in heads.iter().zip(&whole) {
            assert_eq!(
                (
                    &h.id,
                    &h.message,
                    h.source,
                    h.status,
                    &h.updated_at,
                    &h.target
                ),
                (
                    &r.id,
                    &r.message,
                    r.source,
                    r.status,
                    &r.updated_at,
                    &r.target
                )
            );
            assert_eq!(h.host(), r.host());
            assert_eq!(h.host(), Some("edge"));
        }
        let open: Vec<RequestHead> = store.unfinished_as().unwrap();
        assert_eq!(
            open.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
            ["r1"]
        );
        assert_eq!(
            store.count_by_status().unwrap(),
            [
                ("completed".to_string(), 2),
                ("waiting_approval".to_string(), 1)
            ]
        );
        assert_eq!(store.list(None, 2).unwrap().len(), 2, "the limit holds");
        assert_eq!(store.status("r1").unwrap(), Some(Status::WaitingApproval));
        assert_eq!(store.status("nope").unwrap(), None);
    }

    #[test]
    fn saves_survive_reopen_and_events_replay_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        {
            let store = Store::open(&path).unwrap();
            let mut r = request("r1");
            store.save(&r, created()).unwrap();
            r.status = Status::Completed;
            store.save(&r, status(Status::Completed)).unwrap();
            store.save(&request("r2"), created()).unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.get("r1").unwrap().unwrap().status, Status::Completed);
        let events = store.events_after("r1", 0).unwrap();
        assert_eq!(
            events.iter().map(|e| e.kind()).collect::<Vec<_>>(),
            [EventKind::Created, EventKind::Status]
        );
        assert_eq!(store.events_after("r1", events[0].seq).unwrap().len(), 1);
        assert_eq!(
            store
                .unfinished()
                .unwrap()
                .iter()
                .map(|r| r.id.as_str())
                .collect::<Vec<_>>(),
            ["r2"]
        );
        assert_eq!(store.list(Some(Status::Completed), 10).unwrap().len(), 1);
        assert!(store.list_on(None, Some("host-b"), 10).unwrap().is_empty());
    }

    #[test]
    fn requests_are_listed_by_host_their_target_or_their_question_names() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let mut asked = request("asked-b");
        asked.options.host = Some("host-b".into());
        let mut found = request("found-b");
        found.target = Some(Target::container(
            "c".repeat(64),
            "web",
            None,
            Some("host-b".into()),
        ));
        let mut elsewhere = found.clone();
        elsewhere.id = "found-a".into();
        if let Some(t) = elsewhere.target.as_mut() {
            t.host = Some("host-a".into());
        }
        for r in [&asked, &found, &elsewhere, &request("plain")] {
            store.save(r, created()).unwrap();
        }
        let mut on_b: Vec<String> = store
            .list_on(None, Some("host-b"), 10)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        on_b.sort();
        assert_eq!(on_b, ["asked-b", "found-b"]);
        assert_eq!(store.list_on(None, None, 10).unwrap().len(), 4);
    }

    #[test]
    fn a_phase_saves_its_events_together_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let r = request("r1");
        let saved = store
            .save_events(
                &r,
                vec![
                    evidence("inspect"),
                    evidence("logs"),
                    status(Status::Diagnosing),
                ],
            )
            .unwrap();
        assert_eq!(saved.len(), 3);
        assert!(saved[0].seq < saved[1].seq && saved[1].seq < saved[2].seq);
        let replayed = store.events_after("r1", 0).unwrap();
        assert_eq!(
            replayed
                .iter()
                .map(|e| e.payload.clone())
                .collect::<Vec<_>>(),
            saved.iter().map(|e| e.payload.clone()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn only_finished_requests_leave_by_age_or_count_with_their_events() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let at = |i: u32| format!("2026-01-{:02}T00:00:00.000Z", i + 1);
        for i in 0..6 {
            let mut r = request(&format!("r{i}"));
            r.created_at = at(i);
            store.save(&r, created()).unwrap();
            // r0 and r1 stay unfinished; the others end.
            if i >= 2 {
                r.status = Status::Completed;
                store.save(&r, status(Status::Completed)).unwrap();
            }
        }
        // Older than the 4th day: r2 (finished) goes, r0 and r1 (not
        // finished) stay however old they are.
        assert_eq!(store.prune_finished(&at(3), 100).unwrap(), 1);
        assert!(store.get("r2").unwrap().is_none());
        assert!(store.events_after("r2", 0).unwrap().is_empty());
        assert!(store.get("r0").unwrap().is_some() && store.get("r1").unwrap().is_some());
        // At most two finished ones: the oldest of r3, r4, r5 goes.
        assert_eq!(store.prune_finished(&at(0), 2).unwrap(), 1);
        let mut left: Vec<String> = store
            .list(None, 10)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        left.sort();
        assert_eq!(left, ["r0", "r1", "r4", "r5"]);
        assert_eq!(store.events_after("r4", 0).unwrap().len(), 2);
        assert_eq!(store.prune_finished(&at(0), 2).unwrap(), 0);
    }
}
