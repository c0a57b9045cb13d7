//! What a person means past the container they name: one said to be fine
//! points to what is linked to it, a restart said of another does not hold
//! the named one, and what stopped or nothing does is a failure.

use super::*;

#[test]
fn a_container_said_fine_points_to_the_one_linked_to_it() {
    let mut db = in_state("viburnum-db-1", "viburnum", "running", "Up 2 hours");
    db.image = "postgres:16".into();
    let mut joplin = in_state("viburnum-joplin-1", "viburnum", "running", "Up 2 hours");
    joplin.image = "joplin/server:3".into();
    joplin
        .labels
        .insert(DEPENDS_ON.into(), "db:service_started:false".into());
    let fleet = vec![db.clone(), joplin.clone()];
    // Postgres is said to be up and a failure is reported: what uses it.
    assert_eq!(
        found(
            "notes stopped syncing after the move. postgres is up and I can psql into it fine",
            &fleet
        ),
        "viburnum-joplin-1"
    );
    assert_eq!(
        found(
            "the app throws errors, but I can log into postgres directly just fine",
            &fleet
        ),
        "viburnum-joplin-1"
    );
    // Nothing linked to it: the named one stands.
    let mut unlinked = fleet.clone();
    unlinked[1].labels.remove(DEPENDS_ON);
    assert_eq!(
        found("the app throws errors, but postgres is up", &unlinked),
        "viburnum-db-1"
    );
    // Two containers use it: the words decide nothing more.
    let mut other = joplin.clone();
    other.name = "viburnum-worker-1".into();
    other.id = format!("{:0<64}", "viburnum-worker-1");
    let mut two = fleet.clone();
    two.push(other);
    assert_eq!(
        found("the app throws errors, but postgres is up", &two),
        "viburnum-db-1"
    );
    // Said fine with no failure reported: the named one stands.
    assert_eq!(found("postgres is up", &fleet), "viburnum-db-1");
}

const DEPENDS_ON: &str = "com.docker.compose.depends_on";

fn found(msg: &str, fleet: &[ContainerSummaryView]) -> String {
    match discover(msg, fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    }
}

#[test]
fn a_person_reports_what_stopped_and_what_nothing_does() {
    use super::meant::reports_a_failure;
    assert!(reports_a_failure("notes stopped syncing yesterday"));
    assert!(reports_a_failure(
        "nothing on the office lan resolves since the change"
    ));
    assert!(!reports_a_failure("I stopped it for the backup"));
    assert!(!reports_a_failure("nothing to worry about, just checking"));
}

#[test]
fn a_restart_said_of_another_container_does_not_hold_the_named_one() {
    let mut gw = in_state("maple-gateway-1", "maple", "running", "Up 3 hours");
    gw.labels
        .insert(DEPENDS_ON.into(), "broker:service_started:false".into());
    let broker = in_state(
        "maple-broker-1",
        "maple",
        "restarting",
        "Restarting (1) 5 seconds ago",
    );
    let fleet = vec![gw, broker];
    assert_eq!(
        found(
            "the mqtt thing keeps restarting since I gave it a volume, the gateway can't publish anything now",
            &fleet
        ),
        "maple-broker-1"
    );
    // Said of the named one itself: it stands.
    assert_eq!(
        found("the gateway keeps restarting", &fleet),
        "maple-gateway-1"
    );
}
