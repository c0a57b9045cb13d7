use super::*;

const SERVICES: &str = r#"[{
    "ID": "n3urbn38u90m4jz0gvcm4t7ha",
    "Version": {"Index": 73},
    "CreatedAt": "2026-12-02T03:53:10.1Z",
    "UpdatedAt": "2026-12-02T03:53:26.0Z",
    "Spec": {
        "Name": "shop_api",
        "Labels": {"com.docker.stack.namespace": "shop"},
        "TaskTemplate": {
            "ContainerSpec": {
                "Image": "shop/api:2",
                "Env": ["DATABASE_URL=postgres://u:pw@db/shop"],
                "Args": ["serve"],
                "HealthCheck": {"Test": ["CMD", "probe"], "Interval": 2000000000, "Retries": 2}
            },
            "Resources": {"Reservations": {"MemoryBytes": 104857600}},
            "RestartPolicy": {"Condition": "any"},
            "Placement": {"Constraints": ["node.role==manager"]},
            "ForceUpdate": 0
        },
        "Mode": {"Replicated": {"Replicas": 2}},
        "UpdateConfig": {"Parallelism": 1, "FailureAction": "pause", "Monitor": 5000000000, "Order": "stop-first"}
    },
    "PreviousSpec": {
        "Name": "shop_api",
        "TaskTemplate": {"ContainerSpec": {"Image": "shop/api:1"}},
        "Mode": {"Replicated": {"Replicas": 2}}
    },
    "UpdateStatus": {"State": "paused", "StartedAt": "2026-12-02T03:53:26Z", "Message": "update paused due to failure"},
    "ServiceStatus": {"RunningTasks": 1, "DesiredTasks": 2},
    "Endpoint": {}
}, {
    "ID": "9qh7xn0j2r6i0000000000000",
    "Version": {"Index": 12},
    "Spec": {"Name": "greedy", "TaskTemplate": {"ContainerSpec": {"Image": "x"}}, "Mode": {"Global": {}}}
}]"#;

#[test]
fn services_parse_with_their_previous_spec_and_counts() {
    let s = parse_services(SERVICES.as_bytes()).unwrap();
    assert_eq!(s.len(), 2);
    let api = &s[0];
    assert_eq!(api.name, "shop_api");
    assert_eq!(api.version, 73);
    assert_eq!((api.running, api.desired), (1, 2));
    assert_eq!(api.mode, ServiceMode::Replicated);
    assert_eq!(api.previous_image.as_deref(), Some("shop/api:1"));
    assert_eq!(api.update_state, UpdateState::Paused);
    assert_eq!(api.reserve_memory, 104_857_600);
    assert_eq!(api.constraints, ["node.role==manager"]);
    assert_eq!(api.healthcheck.as_ref().unwrap().retries, 2);
    assert_eq!(
        api.update_config.as_ref().unwrap().monitor,
        Duration::from_secs(5)
    );
    assert_eq!(api.resolved().labels["com.docker.stack.namespace"], "shop");
    assert_eq!(s[1].mode, ServiceMode::Global);
    assert_eq!(s[1].previous_image, None);
    assert!(parse_services(b"{\"not\": \"a list\"}").is_err());
}

#[test]
fn tasks_of_the_service_come_newest_first() {
    let body = r#"[
        {"ID": "a", "ServiceID": "s", "Slot": 1, "Status": {"Timestamp": "2026-12-02T03:53:10Z", "State": "failed", "Err": "task: non-zero exit (1)", "ContainerStatus": {"ContainerID": "c1", "ExitCode": 1}}, "DesiredState": "shutdown", "Spec": {"ContainerSpec": {"Image": "x:1"}}},
        {"ID": "b", "ServiceID": "s", "Slot": 1, "Status": {"Timestamp": "2026-12-02T03:53:20Z", "State": "pending", "Err": "no suitable node (insufficient resources on 1 node)"}, "DesiredState": "running"},
        {"ID": "c", "ServiceID": "other", "Status": {"Timestamp": "2026-12-02T03:59:20Z"}}
    ]"#;
    let t = parse_tasks(body.as_bytes(), "s").unwrap();
    assert_eq!(
        t.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["b", "a"]
    );
    assert_eq!(t[1].exit_code, Some(1));
    assert_eq!(t[1].container_id, "c1");
    assert_eq!(t[0].exit_code, None);
    assert!(t[0].error.contains("no suitable node"));
}

#[test]
fn nodes_parse_and_errors_say_what_the_engine_meant() {
    let n = parse_nodes(br#"[{"ID": "x12", "Spec": {"Role": "manager", "Availability": "drain", "Labels": {"rack": "r1"}}, "Description": {"Hostname": "vm", "Resources": {"NanoCPUs": 2000000000, "MemoryBytes": 1024}, "Engine": {"EngineVersion": "20.10.24"}}, "Status": {"State": "ready"}, "ManagerStatus": {"Leader": true}}]"#).unwrap();
    assert_eq!(n[0].hostname, "vm");
    assert_eq!(n[0].availability, "drain");
    assert!(n[0].leader);
    let e = swarm_error(
        "list_services",
        http::StatusCode::SERVICE_UNAVAILABLE,
        br#"{"message":"This node is not a swarm manager. Use \"docker swarm init\"."}"#,
    );
    assert!(matches!(e, DockerError::NotSwarmManager(_)), "{e:?}");
    let e = swarm_error(
        "force_update",
        http::StatusCode::INTERNAL_SERVER_ERROR,
        br#"{"message":"rpc error: code = Unknown desc = update out of sequence"}"#,
    );
    assert!(matches!(e, DockerError::Rejected { .. }), "{e:?}");
    assert_eq!(
        filter_query("service", "abc"),
        "filters=%7B%22service%22%3A%5B%22abc%22%5D%7D"
    );
}

#[test]
fn api_versions_parse_or_are_refused() {
    let v = parse_api_version("1.41").expect("1.41");
    assert_eq!((v.major_version, v.minor_version), (1, 41));
    for bad in ["", "1", "1.x", "a.1", "1.41.2"] {
        assert!(parse_api_version(bad).is_none(), "{bad}");
    }
}
