//! Operators' notes on a container or a service, bounded in number and
//! length, and pruned with the store's retention like finished requests.

use rusqlite::params;

use super::{Store, StoreError};
use crate::model::Note;

/// Notes one target keeps; the oldest must be removed before another.
pub const MAX_PER_TARGET: usize = 20;
/// Notes the store keeps in all.
pub const MAX_NOTES: usize = 1000;
/// The longest note, in bytes.
pub const MAX_LEN: usize = 1000;

/// Why a note was not added: words for the person who tried.
#[derive(Debug, thiserror::Error)]
pub enum NoteError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A target as notes name it: a container's name, a compose
/// `project/service`, or a Swarm service's name (`stack_service`).
pub fn valid_target(target: &str) -> bool {
    let part = |p: &str| {
        // Docker's own rule for names: a letter or digit first.
        p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && p.len() <= 128
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    };
    match target.split_once('/') {
        Some((project, service)) => part(project) && part(service),
        None => part(target),
    }
}

pub fn add(
    store: &Store,
    target: &str,
    text: &str,
    now: &str,
    now_unix: i64,
) -> Result<Note, NoteError> {
    let text = text.trim();
    if !valid_target(target) {
        return Err(NoteError::Invalid(format!(
            "`{target}` is not a target: give a container's name, a compose `project/service`, or a Swarm service's name"
        )));
    }
    if text.is_empty() || text.len() > MAX_LEN {
        return Err(NoteError::Invalid(format!(
            "a note must be 1 to {MAX_LEN} bytes of text"
        )));
    }
    let mut conn = store.lock();
    let tx = conn.transaction().map_err(StoreError::from)?;
    let (on_target, all): (i64, i64) = tx
        .query_row(
            "SELECT (SELECT count(*) FROM notes WHERE target = ?1), (SELECT count(*) FROM notes)",
            [target],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(StoreError::from)?;
    if on_target as usize >= MAX_PER_TARGET {
        return Err(NoteError::Invalid(format!(
            "{target} has {MAX_PER_TARGET} notes, the most one target keeps: remove one first (`drydock note list {target}`, `drydock note remove ID`)"
        )));
    }
    if all as usize >= MAX_NOTES {
        return Err(NoteError::Invalid(format!(
            "the agent keeps {MAX_NOTES} notes, the most it keeps: remove old ones first (`drydock note list`)"
        )));
    }
    let note = Note {
        id: format!("note-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        target: target.into(),
        text: text.into(),
        created_at: now.into(),
    };
    tx.execute(
        "INSERT INTO notes (id, target, text, created_at, created_unix) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![note.id, note.target, note.text, note.created_at, now_unix],
    )
    .map_err(StoreError::from)?;
    tx.commit().map_err(StoreError::from)?;
    Ok(note)
}

/// Every note, or one target's, oldest first.
pub fn list(store: &Store, target: Option<&str>) -> Result<Vec<Note>, StoreError> {
    let conn = store.lock();
    let mut stmt = conn.prepare(
        "SELECT id, target, text, created_at FROM notes WHERE (?1 IS NULL OR target = ?1)
         ORDER BY created_unix, id",
    )?;
    let notes = stmt
        .query_map([target], row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(notes)
}

/// The notes on any of `targets` (the names one target goes by), oldest
/// first.
pub fn on_any(store: &Store, targets: &[String]) -> Result<Vec<Note>, StoreError> {
    let mut notes: Vec<Note> = Vec::new();
    for t in targets {
        for n in list(store, Some(t))? {
            if !notes.iter().any(|m| m.id == n.id) {
                notes.push(n);
            }
        }
    }
    notes.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    Ok(notes)
}

/// Remove a note; `false` when there was none with that id.
pub fn remove(store: &Store, id: &str) -> Result<bool, StoreError> {
    Ok(store
        .lock()
        .execute("DELETE FROM notes WHERE id = ?1", [id])?
        == 1)
}

/// Forget notes written before `before_unix`.
pub fn prune(store: &Store, before_unix: i64) -> Result<usize, StoreError> {
    Ok(store
        .lock()
        .execute("DELETE FROM notes WHERE created_unix < ?1", [before_unix])?)
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Note> {
    Ok(Note {
        id: r.get(0)?,
        target: r.get(1)?,
        text: r.get(2)?,
        created_at: r.get(3)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_checked_bounded_listed_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        for bad in ["", "a/b/c", "shop/", "we b", "../etc"] {
            assert!(add(&store, bad, "x", "t", 1).is_err(), "{bad:?}");
        }
        assert!(add(&store, "web", "   ", "t", 1).is_err());
        assert!(add(&store, "web", &"x".repeat(MAX_LEN + 1), "t", 1).is_err());
        let first = add(&store, "shop/web", "  flaky under load  ", "t1", 10).unwrap();
        assert_eq!(first.text, "flaky under load");
        for i in 1..MAX_PER_TARGET {
            add(&store, "shop/web", &format!("n{i}"), "t2", 20).unwrap();
        }
        let full = add(&store, "shop/web", "one more", "t3", 30).unwrap_err();
        assert!(full.to_string().contains("remove one first"), "{full}");
        add(&store, "db", "primary", "t4", 40).unwrap();
        assert_eq!(
            list(&store, Some("shop/web")).unwrap().len(),
            MAX_PER_TARGET
        );
        let both = on_any(&store, &["db".into(), "shop/web".into(), "db".into()]).unwrap();
        assert_eq!(both.len(), MAX_PER_TARGET + 1);
        assert!(remove(&store, &first.id).unwrap());
        assert!(!remove(&store, &first.id).unwrap());
        assert_eq!(prune(&store, 25).unwrap(), MAX_PER_TARGET - 1);
        assert_eq!(list(&store, None).unwrap().len(), 1);
    }
}
