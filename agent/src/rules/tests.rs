use super::logs::{compiled, LOG_RULES};
use super::*;
use crate::model::{HealthProbeView, LogLineView};

#[test]
fn log_pattern_table() {
    // A pattern that does not compile is skipped at run time (logged),
    // so check here that none is.
    assert_eq!(compiled().len(), LOG_RULES.len(), "every log rule compiles");
    // Real wording, at least two runtimes per class; sources are named
    // in the e2e scenarios (tests/e2e/fault_classes.rs) and the commit.
    let rows: &[(&str, FaultClass, Option<&str>)] = &[
        // config_error
        ("Error: missing required environment variable DATABASE_URL", FaultClass::ConfigError, Some("DATABASE_URL")),
        ("panic: required env var REDIS_URL is not set", FaultClass::ConfigError, Some("REDIS_URL")),
        ("environment variable \"API_KEY\" is not set", FaultClass::ConfigError, Some("API_KEY")),
        ("environment variable \"KAFKA_PROCESS_ROLES\" is not set", FaultClass::ConfigError, Some("KAFKA_PROCESS_ROLES")),
        ("Error: Missing SUPABASE_KEY environment variable", FaultClass::ConfigError, Some("SUPABASE_KEY")),
        ("Error: Missing or invalid GROQ_DAILY_MESSAGE_LIMIT environment variable", FaultClass::ConfigError, Some("GROQ_DAILY_MESSAGE_LIMIT")),
        ("django.core.exceptions.ImproperlyConfigured: Set the DATABASE_URL environment variable", FaultClass::ConfigError, Some("DATABASE_URL")),
        ("/docker-entrypoint.sh: line 9: TF_STATE_BUCKET: parameter null or not set", FaultClass::ConfigError, Some("TF_STATE_BUCKET")),
        ("KeyError: 'SECRET_KEY'", FaultClass::ConfigError, Some("SECRET_KEY")),
        ("Caused by: java.lang.IllegalArgumentException: Could not resolve placeholder 'db.url' in value \"${db.url}\"", FaultClass::ConfigError, Some("db.url")),
        ("Error: Cannot find module '/app/server.js'", FaultClass::ConfigError, Some("/app/server.js")),
        ("ModuleNotFoundError: No module named 'flask'", FaultClass::ConfigError, Some("flask")),
        ("Error: Unable to access jarfile /app/app.jar", FaultClass::ConfigError, Some("/app/app.jar")),
        ("Error: Database is uninitialized and superuser password is not specified.", FaultClass::ConfigError, None),
        ("       You must specify POSTGRES_PASSWORD to a non-empty value for the", FaultClass::ConfigError, Some("POSTGRES_PASSWORD")),
        ("2020-08-20 07:45:48+00:00 [ERROR] [Entrypoint]: Database is uninitialized and password option is not specified", FaultClass::ConfigError, None),
        ("\tYou need to specify one of MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD and MYSQL_RANDOM_ROOT_PASSWORD", FaultClass::ConfigError, Some("MYSQL_ROOT_PASSWORD")),
        ("\tYou need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ROOT_PASSWORD_HASH, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD", FaultClass::ConfigError, Some("MARIADB_ROOT_PASSWORD")),
        ("    - MYSQL_ROOT_PASSWORD", FaultClass::ConfigError, Some("MYSQL_ROOT_PASSWORD")),
        ("2023-11-14 17:27:59.593 UTC [32] FATAL:  password authentication failed for user \"user\"", FaultClass::ConfigError, None),
        ("psycopg2.OperationalError: connection to server at \"db\" (172.18.0.2), port 5432 failed: FATAL:  password authentication failed for user \"app\"", FaultClass::ConfigError, None),
        ("2018-09-07T06:26:23.117937Z 2 [Note] Access denied for user 'root'@'172.18.0.3' (using password: [REDACTED])", FaultClass::ConfigError, None),
        ("*** FATAL CONFIG FILE ERROR (Redis 6.2.6) ***", FaultClass::ConfigError, None),
        ("Bad directive or wrong number of arguments", FaultClass::ConfigError, None),
        ("nginx: [emerg] unknown directive \"more_set_headers\" in /etc/nginx/nginx.conf:10", FaultClass::ConfigError, None),
        ("Failed to configure a DataSource: 'url' attribute is not specified and no embedded datasource could be configured.", FaultClass::ConfigError, None),
        // host_config: Elasticsearch's bootstrap checks (7.x and 8.x
        // wording), MongoDB's warning, inotify (libuv/chokidar, the JVM,
        // .NET, Go's fsnotify), descriptor and thread limits, kernel
        // modules (kmod, iptables, FUSE).
        ("bootstrap check failure [1] of [1]: max virtual memory areas vm.max_map_count [65530] is too low, increase to at least [262144]; for more information see [https://www.elastic.co/guide/en/elasticsearch/reference/8.11/_maximum_map_count_check.html]", FaultClass::HostConfig, Some("vm.max_map_count")),
        ("[1]: max virtual memory areas vm.max_map_count [65530] is too low, increase to at least [262144]", FaultClass::HostConfig, Some("vm.max_map_count")),
        ("{\"t\":{\"$date\":\"2023-11-02T10:01:02.345+00:00\"},\"s\":\"W\",  \"c\":\"CONTROL\",  \"id\":5123300, \"ctx\":\"initandlisten\",\"msg\":\"vm.max_map_count is too low\",\"attr\":{\"currentValue\":65530,\"recommendedMinimum\":102400,\"maxConns\":51200}}", FaultClass::HostConfig, Some("vm.max_map_count")),
        ("Error: ENOSPC: System limit for number of file watchers reached, watch '/app/src'", FaultClass::HostConfig, None),
        ("java.io.IOException: User limit of inotify watches reached", FaultClass::HostConfig, None),
        ("System.IO.IOException: The configured user limit (128) on the number of inotify instances has been reached, or the per-process limit on the number of open file descriptors has been reached.", FaultClass::HostConfig, None),
        ("level=error ts=2023-05-01T10:00:00Z caller=main.go:71 msg=\"error creating promtail\" error=\"failed to make file target manager: failed to create fsnotify watcher: too many open files\"", FaultClass::HostConfig, None),
        ("max file descriptors [4096] for elasticsearch process is too low, increase to at least [65535]", FaultClass::HostConfig, None),
        ("2023/06/01 10:00:00 http: Accept error: accept tcp [::]:8080: accept4: too many open files; retrying in 5ms", FaultClass::HostConfig, None),
        ("2023/06/01 10:00:00 [alert] 1#1: 1024 worker_connections exceed open file resource limit: 1024", FaultClass::HostConfig, None),
        ("[2.123s][warning][os,thread] Failed to start thread \"Unknown thread\" - pthread_create failed (EAGAIN) for attributes: stacksize: 1024k, guardsize: 0k, detached.", FaultClass::HostConfig, None),
        ("Exception in thread \"main\" java.lang.OutOfMemoryError: unable to create native thread: possibly out of memory or process/resource limits reached", FaultClass::HostConfig, None),
        ("modprobe: FATAL: Module wireguard not found in directory /lib/modules/6.1.0-13-amd64", FaultClass::HostConfig, Some("wireguard")),
        ("iptables v1.8.7 (legacy): can't initialize iptables table `nat': Table does not exist (do you need to insmod?)", FaultClass::HostConfig, Some("nat")),
        ("fuse: device not found, try 'modprobe fuse' first", FaultClass::HostConfig, Some("fuse")),
        // Rust's expect on a missing variable; Rails without its secret.
        ("DATABASE_URL must be set: NotPresent", FaultClass::ConfigError, Some("DATABASE_URL")),
        ("/usr/local/bundle/gems/railties-7.1.3/lib/rails/application.rb:658:in `validate_secret_key_base': Missing `secret_key_base` for 'production' environment, set this string with `bin/rails credentials:edit` (ArgumentError)", FaultClass::ConfigError, Some("secret_key_base")),
        ("/usr/local/bundle/gems/railties-7.1.3/lib/rails/application.rb:658:in `validate_secret_key_base': [REDACTED] `secret_key_base` for 'production' environment, set this string with `bin/rails credentials:[REDACTED] (ArgumentError)", FaultClass::ConfigError, Some("secret_key_base")),
        // redis-rb.
        ("Error connecting to Redis on redis:6379 (SocketError) (Redis::CannotConnectError)", FaultClass::DependencyUnavailable, Some("redis:6379")),
        // Node repeats the code on its own line: not a full disk by itself.
        ("  code: 'ENOSPC',", FaultClass::Unknown, None),
        // PostgreSQL's /dev/shm is the container's shm_size, not the disk.
        ("2023-08-01 10:00:00.000 UTC [77] ERROR:  could not resize shared memory segment \"/PostgreSQL.1450751626\" to 146800640 bytes: No space left on device", FaultClass::ConfigError, None),
        // Healthcheck tools that cannot reach another service.
        ("curl: (6) Could not resolve host: db", FaultClass::DependencyUnavailable, Some("db")),
        ("curl: (7) Failed to connect to api port 8080 after 3 ms: Couldn't connect to server", FaultClass::DependencyUnavailable, Some("api")),
        ("curl: (7) Failed to connect to api port 8080: Connection refused", FaultClass::DependencyUnavailable, Some("api")),
        ("wget: bad address 'backend:8080'", FaultClass::DependencyUnavailable, Some("backend:8080")),
        ("wget: can't connect to remote host (172.18.0.3): Connection refused", FaultClass::DependencyUnavailable, Some("172.18.0.3")),
        ("db:5432 - no response", FaultClass::DependencyUnavailable, Some("db:5432")),
        ("Could not connect to Redis at redis:6379: Connection refused", FaultClass::DependencyUnavailable, Some("redis:6379")),
        ("Could not connect to Redis at cache:6379: Name or service not known", FaultClass::DependencyUnavailable, Some("cache:6379")),
        ("error: 'Can't connect to MySQL server on 'mysql:3306' (111)'", FaultClass::DependencyUnavailable, Some("mysql:3306")),
        ("error: 'Unknown MySQL server host 'mysql' (-2)'", FaultClass::DependencyUnavailable, Some("mysql")),
        // port_conflict
        ("listen tcp :8080: bind: address already in use", FaultClass::PortConflict, Some(":8080")),
        ("Error: listen EADDRINUSE: address already in use :::3000", FaultClass::PortConflict, Some(":::3000")),
        ("nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)", FaultClass::PortConflict, Some("0.0.0.0:80")),
        ("Web server failed to start. Port 8080 was already in use.", FaultClass::PortConflict, Some("8080")),
        ("The Tomcat connector configured to listen on port 8080 failed to start. The port may already be in use or the connector may be misconfigured.", FaultClass::PortConflict, Some("8080")),
        ("OSError: [Errno 98] Address already in use", FaultClass::PortConflict, None),
        ("[2023-07-12 15:39:15 +0000] [7749] [ERROR] Connection in use: ('0.0.0.0', 8000)", FaultClass::PortConflict, Some("8000")),
        ("2023-07-05 16:16:31.548 UTC [1] LOG:  could not bind IPv4 address \"127.0.0.1\": Address already in use", FaultClass::PortConflict, None),
        ("2023-07-05 16:16:31.548 UTC [1] HINT:  Is another postmaster already running on port 5432? If not, wait a few seconds and retry.", FaultClass::PortConflict, Some("5432")),
        ("2019-07-17 00:07:39 23162 [ERROR] Can't start server: Bind on TCP/IP port: Address already in use", FaultClass::PortConflict, None),
        ("2019-07-17 00:07:39 23162 [ERROR] Do you already have another mysqld server running on port: 3306 ?", FaultClass::PortConflict, Some("3306")),
        ("1988:M 05 May 2025 11:23:04.084 # Warning: Could not create server TCP listening socket 127.0.0.1:6379: bind: Address already in use", FaultClass::PortConflict, Some("127.0.0.1:6379")),
        // permission_denied
        ("open /data/app.db: permission denied", FaultClass::PermissionDenied, None),
        ("PermissionError: [Errno 13] Permission denied: '/var/log/app.log'", FaultClass::PermissionDenied, None),
        ("Error: EACCES: permission denied, mkdir '/home/electerm/data/electerm_session_logs'", FaultClass::PermissionDenied, None),
        ("2016/05/03 10:04:14 [emerg] 1#0: open() \"/var/log/access.log\" failed (13: Permission denied)", FaultClass::PermissionDenied, None),
        ("initdb: error: could not change permissions of directory \"/var/lib/postgresql/data\": Operation not permitted", FaultClass::PermissionDenied, None),
        ("mysqld: Can't create/write to file '/var/lib/mysql/is_writable' (Errcode: 13 - Permission denied)", FaultClass::PermissionDenied, None),
        ("98:C 22 Jan 2019 18:40:10.098 # Failed opening the RDB file dump.rdb (in server root dir /var/lib/redis) for saving: Permission denied", FaultClass::PermissionDenied, None),
        // disk_full
        ("write /data/x: no space left on device", FaultClass::DiskFull, None),
        ("PANIC:  could not write to file \"pg_wal/xlogtemp.32\": No space left on device", FaultClass::DiskFull, None),
        ("ERROR:  could not extend file \"base/16384/16492\": No space left on device", FaultClass::DiskFull, None),
        ("2017-08-22 8:22:53 140295123512064 [Warning] mysqld: Disk is full writing '/var/vcap/data/mysql/tmp/#sql_41a0_0.MAD' (Errcode: 28 \"No space left on device\"). Waiting for someone to free space...", FaultClass::DiskFull, None),
        ("143730:C 08 Nov 2021 14:26:56.020 # Write error saving DB on disk: No space left on device", FaultClass::DiskFull, None),
        ("Error: ENOSPC: no space left on device, write", FaultClass::DiskFull, None),
        // oom_killed (the runtime's own error)
        ("Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space", FaultClass::OomKilled, None),
        ("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", FaultClass::OomKilled, None),
        ("FATAL ERROR: Ineffective mark-compacts near heap limit Allocation failed - JavaScript heap out of memory", FaultClass::OomKilled, None),
        ("fatal error: runtime: out of memory", FaultClass::OomKilled, None),
        ("MemoryError", FaultClass::OomKilled, None),
        ("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 58.0 GiB for an array with shape (176351, 176460) and data type uint16", FaultClass::OomKilled, None),
        ("ERROR:  out of memory", FaultClass::OomKilled, None),
        // dependency_unavailable
        ("dial tcp 172.18.0.2:5432: connect: connection refused", FaultClass::DependencyUnavailable, Some("172.18.0.2:5432")),
        ("2023/12/09 17:09:23 init.go:277: error connecting to DB: dial tcp: lookup listmonk on 127.0.0.11:53: no such host", FaultClass::DependencyUnavailable, Some("listmonk")),
        ("dial tcp: lookup db on 127.0.0.11:53: no such host", FaultClass::DependencyUnavailable, Some("db")),
        ("dial tcp 10.0.0.5:5432: i/o timeout", FaultClass::DependencyUnavailable, Some("10.0.0.5:5432")),
        ("Error: connect ECONNREFUSED 10.0.0.5:6379", FaultClass::DependencyUnavailable, Some("10.0.0.5:6379")),
        ("Error: Redis connection to localhost:6379 failed - connect ECONNREFUSED 127.0.0.1:6379", FaultClass::DependencyUnavailable, Some("localhost:6379")),
        ("[ioredis] Unhandled error event: Error: getaddrinfo ENOTFOUND redis", FaultClass::DependencyUnavailable, Some("redis")),
        ("psycopg2.OperationalError: could not connect to server: Connection refused", FaultClass::DependencyUnavailable, None),
        ("\tIs the server running on host \"db\" (172.18.0.2) and accepting", FaultClass::DependencyUnavailable, Some("db")),
        ("psycopg2.OperationalError: connection to server at \"localhost\" (127.0.0.1), port 5432 failed: Connection refused", FaultClass::DependencyUnavailable, Some("localhost")),
        ("psycopg2.OperationalError: could not translate host name \"db\" to address: Name or service not known", FaultClass::DependencyUnavailable, Some("db")),
        ("redis.exceptions.ConnectionError: Error 111 connecting to redis:6379. Connection refused.", FaultClass::DependencyUnavailable, Some("redis:6379")),
        ("org.postgresql.util.PSQLException: Connection to localhost:5432 refused. Check that the hostname and port are correct and that the postmaster is accepting TCP/IP connections.", FaultClass::DependencyUnavailable, Some("localhost:5432")),
        ("java.net.ConnectException: Connection refused", FaultClass::DependencyUnavailable, None),
        ("ERROR 2003 (HY000): Can't connect to MySQL server on 'klara-db' (111 \"Connection refused\")", FaultClass::DependencyUnavailable, Some("klara-db")),
        ("nginx: [emerg] host not found in upstream \"pipedfrontend:80\" in /etc/nginx/conf.d/pipedfrontend.conf:2", FaultClass::DependencyUnavailable, Some("pipedfrontend:80")),
        ("2024/01/01 00:00:00 [error] 29#29: *1 connect() failed (111: Connection refused) while connecting to upstream, client: 172.18.0.1, server: localhost, request: \"GET / HTTP/1.1\", upstream: \"http://172.18.0.3:8080/\", host: \"localhost\"", FaultClass::DependencyUnavailable, Some("172.18.0.3:8080")),
        ("connect() failed (111: Connection refused) while connecting to upstream", FaultClass::DependencyUnavailable, None),
        // crash
        ("panic: runtime error: invalid memory address or nil pointer dereference", FaultClass::Crash, None),
        ("[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x6fc2ff]", FaultClass::Crash, None),
        ("thread 'main' panicked at src/main.rs:3:5", FaultClass::Crash, None),
        ("Traceback (most recent call last):", FaultClass::Crash, None),
        ("ZeroDivisionError: division by zero", FaultClass::Crash, None),
        ("TypeError: Cannot read properties of undefined (reading 'detail')", FaultClass::Crash, None),
        ("Node.js v18.16.0", FaultClass::Crash, None),
        ("Exception in thread \"main\" java.lang.NullPointerException", FaultClass::Crash, None),
        ("2024-01-01 12:00:00.000 ERROR 1 --- [           main] o.s.boot.SpringApplication               : Application run failed", FaultClass::Crash, None),
        ("2026-04-14 10:32:05 UTC [1159124] LOG:  server process (PID 1163415) was terminated by signal 11: Segmentation fault", FaultClass::Crash, None),
        ("1:M 08 Nov 2023 12:28:10.501 # Redis 7.0.12 crashed by signal: 11, si_code: 1", FaultClass::Crash, None),
        // nothing
        ("INFO server started", FaultClass::Unknown, None),
        ("Server running on port 3000", FaultClass::Unknown, None),
        ("2024-01-01 LOG:  database system is ready to accept connections", FaultClass::Unknown, None),
    ];
    for (line, class, detail) in rows {
        let got = match_logs(&[line.to_string()]);
        match got {
            None => assert_eq!(*class, FaultClass::Unknown, "{line}: no match"),
            Some(m) => {
                assert_eq!(m.class, *class, "{line}");
                if let Some(d) = detail {
                    assert_eq!(m.detail.as_deref(), Some(*d), "{line}");
                }
            }
        }
    }

    // Whole outputs, as `docker logs` returns them: the official images'
    // entrypoints spread one error over several lines, and the advice
    // must name the variable to set (not the last one listed).
    let blocks: &[(&[&str], FaultClass, &str)] = &[
        (
            &[
                "Error: Database is uninitialized and superuser password is not specified.",
                "       You must specify POSTGRES_PASSWORD to a non-empty value for the",
                "       superuser. For example, \"-e POSTGRES_PASSWORD=[REDACTED]\" on \"docker run\".",
                "",
                "       You may also use \"POSTGRES_HOST_AUTH_METHOD=trust\" to allow all",
                "       connections without a password. This is *not* recommended.",
                "",
                "       See PostgreSQL documentation about \"trust\":",
                "       https://www.postgresql.org/docs/current/auth-trust.html",
            ],
            FaultClass::ConfigError,
            "POSTGRES_PASSWORD",
        ),
        (
            &[
                "2023-07-27 13:19:36+00:00 [Note] [Entrypoint]: Entrypoint script for MySQL Server 8.0.34-1.el8 started.",
                "2023-07-27 13:19:36+00:00 [ERROR] [Entrypoint]: Database is uninitialized and password option is not specified",
                "    You need to specify one of the following as an environment variable:",
                "    - MYSQL_ROOT_PASSWORD",
                "    - MYSQL_ALLOW_EMPTY_PASSWORD",
                "    - MYSQL_RANDOM_ROOT_PASSWORD",
            ],
            FaultClass::ConfigError,
            "MYSQL_ROOT_PASSWORD",
        ),
        (
            &[
                "psycopg2.OperationalError: could not connect to server: Connection refused",
                "\tIs the server running on host \"db\" (172.18.0.2) and accepting",
                "\tTCP/IP connections on port 5432?",
            ],
            FaultClass::DependencyUnavailable,
            "db",
        ),
        (
            // A disk-full PANIC is disk_full, not the crash it causes.
            &[
                "2024-01-01 00:00:00.000 UTC [27] PANIC:  could not write to file \"pg_wal/xlogtemp.27\": No space left on device",
                "2024-01-01 00:00:00.001 UTC [1] LOG:  WAL writer process (PID 27) was terminated by signal 6: Aborted",
                "2024-01-01 00:00:00.002 UTC [1] LOG:  terminating any other active server processes",
            ],
            FaultClass::DiskFull,
            "",
        ),
    ];
    for (lines, class, detail) in blocks {
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let m = match_logs(&lines).unwrap_or_else(|| panic!("no match: {lines:?}"));
        assert_eq!(m.class, *class, "{lines:?}");
        if !detail.is_empty() {
            assert_eq!(m.detail.as_deref(), Some(*detail), "{lines:?}");
        }
    }

    // A crash quotes the error itself, not the trailer after it.
    for (lines, quoted) in [
        (
            &[
                "TypeError: Cannot read properties of undefined (reading 'detail')",
                "    at Object.bodyHasError (/app/node_modules/docker-hub-api/src/api.js:1310:45)",
                "",
                "Node.js v18.16.0",
            ][..],
            "TypeError: ",
        ),
        (
            &[
                "Traceback (most recent call last):",
                "  File \"/app/worker.py\", line 12, in <module>",
                "ZeroDivisionError: division by zero",
            ],
            "ZeroDivisionError: ",
        ),
        (
            &[
                "panic: runtime error: invalid memory address or nil pointer dereference",
                "[signal SIGSEGV: segmentation violation code=0x1 addr=0x20 pc=0x6fc2ff]",
            ],
            "panic: ",
        ),
    ] {
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let m = match_logs(&lines).unwrap_or_else(|| panic!("no match: {lines:?}"));
        assert_eq!(m.class, FaultClass::Crash, "{lines:?}");
        assert!(m.line.starts_with(quoted), "quotes {quoted:?}: {}", m.line);
    }
}

fn view() -> ContainerView {
    ContainerView {
        name: "web".into(),
        status: "running".into(),
        running: true,
        health_status: "none".into(),
        ..Default::default()
    }
}

/// Log lines as the executor would answer them.
fn logs_of(lines: &[&str]) -> LogsView {
    LogsView {
        lines: lines
            .iter()
            .map(|l| LogLineView {
                stream: "stderr".into(),
                text: l.to_string(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn run(c: &ContainerView, lines: &[&str]) -> Finding {
    let logs = logs_of(lines);
    diagnose(&Observation {
        container: c,
        container_evidence: "ev-1",
        logs: &logs,
        logs_evidence: "ev-2",
        events: &[],
        events_evidence: "",
        past_death: None,
        asked: None,
        now_unix: 0,
        change: None,
        ran_well_after: RAN_WELL_AFTER_SECS,
    })
}

#[test]
fn an_unhealthy_cause_quotes_the_newest_error_line() {
    let c = ContainerView {
        health_status: "unhealthy".into(),
        failing_streak: 2,
        ..view()
    };
    let f = run(
        &c,
        &[
            "INFO ok",
            "ERROR worker pool exhausted: all 8 workers blocked",
            "INFO tick",
        ],
    );
    let cause = &f.diagnosis.causes[0];
    assert_eq!(cause.class, FaultClass::Unhealthy);
    assert!(
        cause.reason.contains("worker pool exhausted"),
        "{}",
        cause.reason
    );
    assert_eq!(cause.evidence_ids, ["ev-1", "ev-2"]);
}

#[test]
fn an_error_the_program_recovered_from_is_no_cause() {
    let c = ContainerView {
        health_status: "unhealthy".into(),
        failing_streak: 9,
        ..view()
    };
    let f = run(
        &c,
        &[
            r#"level=info msg="starting" version=3.4.1"#,
            r#"level=error msg="failed to refresh license cache" err="dial tcp 10.96.0.15:443: i/o timeout""#,
            r#"level=info msg="license cache refreshed" entries=1"#,
            "ERROR worker pool exhausted: all 8 workers blocked waiting for lock (deadlock?)",
        ],
    );
    let classes: Vec<FaultClass> = f.diagnosis.causes.iter().map(|c| c.class).collect();
    assert_eq!(classes[0], FaultClass::Unhealthy, "{:?}", f.diagnosis);
    assert!(
        !classes.contains(&FaultClass::DependencyUnavailable),
        "{:?}",
        f.diagnosis
    );
    assert!(
        !f.diagnosis.summary.contains("10.96.0.15"),
        "{}",
        f.diagnosis.summary
    );
}

#[test]
fn state_rules_table() {
    let exited = |code: i64| ContainerView {
        running: false,
        status: "exited".into(),
        exit_code: code,
        ..view()
    };
    let rows: Vec<(ContainerView, Vec<&str>, FaultClass)> = vec![
        (view(), vec![], FaultClass::Healthy),
        (ContainerView { health_status: "unhealthy".into(), failing_streak: 3, health_log: vec![HealthProbeView { exit_code: 1, output: "HTTP 503".into() }], ..view() }, vec![], FaultClass::Unhealthy),
        (ContainerView { health_status: "unhealthy".into(), health_log: vec![HealthProbeView { exit_code: 127, output: "OCI runtime exec failed: exec: \"curl\": executable file not found in $PATH".into() }], ..view() }, vec![], FaultClass::HealthcheckBroken),
        (exited(0), vec![], FaultClass::Stopped),
        (exited(137), vec![], FaultClass::Stopped),
        (ContainerView { oom_killed: true, ..exited(137) }, vec![], FaultClass::OomKilled),
        (exited(1), vec!["Error: missing required environment variable DATABASE_URL"], FaultClass::ConfigError),
        // Words drydock knows nothing of, and a plain exit code: unknown,
        // not a guess.
        (exited(2), vec!["something odd"], FaultClass::Unknown),
        (exited(2), vec!["panic: runtime error: index out of range [3] with length 3"], FaultClass::Crash),
        (exited(139), vec![], FaultClass::Crash),
        (exited(127), vec!["/docker-entrypoint.sh: exec: line 9: gunicorn: not found"], FaultClass::ConfigError),
        (exited(1), vec!["INFO booting", "OSError: [Errno 30] Read-only file system: '/var/lib/app/state'"], FaultClass::PermissionDenied),
        (ContainerView { restarting: true, restart_count: 5, ..exited(1) }, vec![], FaultClass::CrashLoop),
        (ContainerView { error: "driver failed programming external connectivity on endpoint x: Bind for 0.0.0.0:8080 failed: port is already allocated".into(), ..exited(128) }, vec![], FaultClass::PortConflict),
        // The engine's own errors (State.Error).
        (ContainerView { error: "mkdir /var/lib/docker/overlay2/abc/merged: no space left on device".into(), ..exited(128) }, vec![], FaultClass::DiskFull),
        (ContainerView { error: "failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"/app\": exec format error: unknown".into(), ..exited(128) }, vec![], FaultClass::ConfigError),
        (ContainerView { error: "Error response from daemon: No such image: shop/api:2.1".into(), ..exited(128) }, vec![], FaultClass::ConfigError),
    ];
    for (c, lines, want) in rows {
        let f = run(&c, &lines);
        assert_eq!(f.diagnosis.causes[0].class, want, "{c:?}");
        assert!(!f.diagnosis.causes[0].evidence_ids.is_empty());
    }
    let f = run(
        &exited(1),
        &["Error: missing required environment variable DATABASE_URL"],
    );
    assert_eq!(f.detail.as_deref(), Some("DATABASE_URL"));
    assert_eq!(f.diagnosis.causes[0].evidence_ids, ["ev-1", "ev-2"]);
}

#[test]
fn a_healthcheck_that_cannot_reach_another_service_names_it() {
    let probing = |output: &str| ContainerView {
        name: "shop-web-1".into(),
        id: "a".repeat(64),
        aliases: vec!["web".into()],
        health_status: "unhealthy".into(),
        failing_streak: 3,
        health_log: vec![HealthProbeView {
            exit_code: 6,
            output: output.into(),
        }],
        ..view()
    };
    let f = run(&probing("curl: (6) Could not resolve host: db\n"), &[]);
    let classes: Vec<FaultClass> = f.diagnosis.causes.iter().map(|c| c.class).collect();
    assert_eq!(
        classes,
        [FaultClass::Unhealthy, FaultClass::DependencyUnavailable]
    );
    assert_eq!(f.detail.as_deref(), Some("db"));
    assert!(
        f.diagnosis.causes[1]
            .reason
            .contains("its healthcheck cannot reach db"),
        "{:?}",
        f.diagnosis.causes[1]
    );
    // Two lines of mysqladmin; the second names the host.
    let f = run(&probing("mysqladmin: connect to server at 'mysql' failed\nerror: 'Unknown MySQL server host 'mysql' (-2)'"), &[]);
    assert_eq!(f.detail.as_deref(), Some("mysql"));
    // Its own port is not a dependency: the service itself is wedged.
    for own in [
        "curl: (7) Failed to connect to localhost port 8080 after 0 ms: Couldn't connect to server",
        "curl: (7) Failed to connect to web port 8080 after 0 ms: Couldn't connect to server",
        "127.0.0.1:5432 - no response",
    ] {
        let f = run(&probing(own), &[]);
        assert_eq!(
            f.diagnosis.causes.len(),
            1,
            "{own}: {:?}",
            f.diagnosis.causes
        );
    }
    // The logs naming the same class add no second dependency cause.
    let f = run(
        &probing("curl: (6) Could not resolve host: db"),
        &["dial tcp: lookup db on 127.0.0.11:53: no such host"],
    );
    assert_eq!(f.diagnosis.causes.len(), 2, "{:?}", f.diagnosis.causes);
}

#[test]
fn a_job_that_finished_is_stopped_and_said_to_be_done() {
    let done = |name: &str, policy: &str, last: &str| {
        let c = ContainerView {
            name: name.into(),
            running: false,
            status: "exited".into(),
            exit_code: 0,
            restart_policy: policy.into(),
            ..view()
        };
        run(&c, &["INFO starting", last])
    };
    let f = done("shop-migrate-1", "no", "INFO applied 3 migrations");
    assert_eq!(f.diagnosis.causes[0].class, FaultClass::Stopped);
    assert!(f.finished_job);
    assert!(
        f.diagnosis.causes[0]
            .reason
            .contains("one-off job that ran to completion"),
        "{}",
        f.diagnosis.causes[0].reason
    );
    assert!(
        done("reports", "", "INFO nightly export finished").finished_job,
        "a last line that says done"
    );
    // A service that exited 0 is not a job: a start brings it back.
    assert!(!done("shop-web-1", "no", "INFO shutting down").finished_job);
    // A policy that would have started it again: not a job.
    assert!(!done("shop-migrate-1", "unless-stopped", "INFO done").finished_job);
    // Stopped by a person: not finished on its own.
    let c = ContainerView {
        name: "nightly-backup".into(),
        running: false,
        status: "exited".into(),
        exit_code: 0,
        ..view()
    };
    let events = [event(10, "kill", None, "15"), event(11, "die", Some(0), "")];
    assert!(!run_with_events(&c, &events).finished_job);
}

/// The cause nearest the exit wins, whatever the classes' table order.
#[test]
fn the_newest_cause_wins_in_both_orders() {
    let auth = "FATAL: password authentication failed for user \"shop\"";
    let disk = "ERROR: could not extend file \"base/16384/2619\": No space left on device";
    let lines = |v: &[&str]| v.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    let m = match_logs(&lines(&[auth, "INFO retrying", disk])).expect("match");
    assert_eq!(m.class, FaultClass::DiskFull, "{}", m.line);
    let m = match_logs(&lines(&[disk, "INFO retrying", auth])).expect("match");
    assert_eq!(m.class, FaultClass::ConfigError, "{}", m.line);
    // A crash trailer after the line that says why does not hide it.
    let m = match_logs(&lines(&[
        "Error: Missing SUPABASE_KEY environment variable",
        "    at Object.<anonymous> (/app/index.js:3:9)",
        "Node.js v20.11.0",
    ]))
    .expect("match");
    assert_eq!(m.class, FaultClass::ConfigError);
    assert_eq!(m.detail.as_deref(), Some("SUPABASE_KEY"));
    // Within the chosen class, the line that names the dependency is quoted.
    let m = match_logs(&lines(&[
        "Error: connect ECONNREFUSED 10.0.0.5:5432",
        "    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)",
        "Error: connection refused",
    ]))
    .expect("match");
    assert_eq!(m.detail.as_deref(), Some("10.0.0.5:5432"));
}

/// New shapes, each in the wording of at least two runtimes.
#[test]
fn resets_missing_files_tls_dns_and_architecture() {
    for (line, class, detail) in [
        // connection reset by peer: Go, Node, Python, the JVM
        ("read tcp 172.18.0.3:41234->172.18.0.2:5432: read: connection reset by peer", FaultClass::DependencyUnavailable, Some("172.18.0.2:5432")),
        ("Error: read ECONNRESET", FaultClass::DependencyUnavailable, None),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", FaultClass::DependencyUnavailable, None),
        ("java.net.SocketException: Connection reset", FaultClass::DependencyUnavailable, None),
        // a file missing at start: Node, Python, Go
        ("Error: ENOENT: no such file or directory, open '/app/config/production.json'", FaultClass::ConfigError, Some("/app/config/production.json")),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'settings.yaml'", FaultClass::ConfigError, Some("settings.yaml")),
        ("open /etc/shop/config.yml: no such file or directory", FaultClass::ConfigError, Some("/etc/shop/config.yml")),
        // TLS: Go, Node, Python, the JVM
        ("Get \"https://api.example.com\": x509: certificate has expired or is not yet valid: current time 2026-12-01", FaultClass::ConfigError, None),
        ("Post \"https://vault:8200/v1/auth\": x509: certificate signed by unknown authority", FaultClass::ConfigError, None),
        ("Error: certificate has expired code: 'CERT_HAS_EXPIRED'", FaultClass::ConfigError, None),
        ("ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate", FaultClass::ConfigError, None),
        ("javax.net.ssl.SSLHandshakeException: PKIX path building failed: unable to find valid certification path", FaultClass::ConfigError, None),
        // DNS failures rather than answers: Go, Node, dig-style
        ("dial tcp: lookup db on 127.0.0.11:53: read udp 127.0.0.1:50714->127.0.0.11:53: i/o timeout", FaultClass::DependencyUnavailable, Some("db")),
        ("Error: getaddrinfo EAI_AGAIN redis", FaultClass::DependencyUnavailable, Some("redis")),
        (";; ->>HEADER<<- opcode: QUERY, status: SERVFAIL, id: 4242", FaultClass::DependencyUnavailable, None),
        // exec format error: runc via Docker, and the older wording
        ("exec /usr/local/bin/api: exec format error", FaultClass::ConfigError, Some("/usr/local/bin/api")),
        ("standard_init_linux.go:228: exec user process caused: exec format error", FaultClass::ConfigError, None),
        // no space left on device: postgres, Go
        ("ERROR: could not extend file \"base/1/2\": No space left on device", FaultClass::DiskFull, None),
        ("write /data/wal/000123: no space left on device", FaultClass::DiskFull, None),
    ] {
        let m = match_logs(&[line.to_string()]).unwrap_or_else(|| panic!("no match: {line}"));
        assert_eq!(m.class, class, "{line}");
        if let Some(d) = detail {
            assert_eq!(m.detail.as_deref(), Some(d), "{line}");
        }
    }
}

#[test]
fn the_grant_vocabulary_is_the_rules_engines() {
    for class in drydock_proto::grant::FAULT_CLASSES {
        let parsed: Result<crate::model::FaultClass, _> =
            serde_json::from_value(serde_json::json!(class));
        assert!(parsed.is_ok(), "{class} is not a FaultClass");
    }
}

fn event(secs: i64, action: &str, exit: Option<i64>, signal: &str) -> crate::model::ContainerEvent {
    crate::model::ContainerEvent {
        time_nanos: secs * 1_000_000_000,
        container_id: "c".into(),
        name: "web".into(),
        action: action.into(),
        exit_code: exit,
        signal: signal.into(),
        ..Default::default()
    }
}

/// Diagnose with engine events (now is a minute after the last one), and
/// optionally a past death and the time a question asked about.
fn diagnose_with(
    c: &ContainerView,
    logs: &LogsView,
    events: &[crate::model::ContainerEvent],
    past_death: Option<PastDeath<'_>>,
    asked: Option<AskedTime>,
) -> Finding {
    diagnose(&Observation {
        container: c,
        container_evidence: "ev-1",
        logs,
        logs_evidence: "ev-2",
        events,
        events_evidence: "ev-3",
        past_death,
        asked,
        now_unix: events
            .last()
            .map_or(0, |e| e.time_nanos / 1_000_000_000 + 60),
        change: None,
        ran_well_after: RAN_WELL_AFTER_SECS,
    })
}

fn run_with_events(c: &ContainerView, events: &[crate::model::ContainerEvent]) -> Finding {
    diagnose_with(c, &LogsView::default(), events, None, None)
}

/// A running container and what it logged before one of its deaths.
mod history;

/// What a line names, followed into the definition.
mod following;

/// One quote must not decide: a Python traceback ending in a KeyError for
/// a variable-shaped name, quoted or not, and an error line in words no
/// rule knows that names a setting the environment lacks, are all a
/// missing setting, and the finding names the variable.
#[test]
fn an_unset_variable_is_a_setting_whatever_the_words_around_it() {
    let dead = ContainerView {
        running: false,
        status: "exited".into(),
        exit_code: 1,
        env: vec!["DATABASE_URI=<redacted>".into(), "PATH=/usr/bin".into()],
        ..view()
    };
    for last in [
        "KeyError: DATABASE_URL",
        "KeyError: 'DATABASE_URL'",
        "FATAL: DATABASE_URL undefined, refusing to start",
    ] {
        let f = run(
            &dead,
            &[
                "Traceback (most recent call last):",
                "  File \"/app/main.py\", line 3, in <module>",
                "    url = os.environ[\"DATABASE_URL\"]",
                last,
            ],
        );
        let cause = &f.diagnosis.causes[0];
        assert_eq!(
            cause.class,
            FaultClass::ConfigError,
            "{last}: {}",
            cause.reason
        );
        assert_eq!(f.detail.as_deref(), Some("DATABASE_URL"), "{last}");
        assert!(
            cause.reason.contains("DATABASE_URI"),
            "the near miss is named: {}",
            cause.reason
        );
    }
    // A variable the environment sets is not a missing setting.
    let set = ContainerView {
        env: vec!["DATABASE_URL=<redacted>".into()],
        ..dead
    };
    let f = run(&set, &["FATAL: DATABASE_URL undefined, refusing to start"]);
    assert_ne!(
        f.diagnosis.causes[0].class,
        FaultClass::ConfigError,
        "{}",
        f.diagnosis.causes[0].reason
    );
}

/// A runtime's own words for a crash are a crash whatever follows them,
/// not an unknown: Go's `panic:`, Rust's `panicked at`, .NET's
/// `Unhandled exception`, JavaScript's `Uncaught`.
#[test]
fn a_runtime_crash_is_a_crash_whatever_its_message() {
    let dead = |code: i64| ContainerView {
        running: false,
        status: "exited".into(),
        exit_code: code,
        ..view()
    };
    for (code, line) in [
        (2, "panic: session store handshake failed (attempt 1)"),
        (101, "thread 'main' panicked at src/main.rs:9:5:"),
        (
            134,
            "Unhandled exception. System.InvalidOperationException: the ledger is sealed",
        ),
        (1, "Uncaught TypeError: ledger.seal is not a function"),
    ] {
        let f = run(&dead(code), &["INFO starting", line]);
        assert_eq!(
            f.diagnosis.causes[0].class,
            FaultClass::Crash,
            "{line}: {}",
            f.diagnosis.causes[0].reason
        );
    }
    // Words of no runtime's crash stay unknown.
    let f = run(
        &dead(3),
        &[
            "INFO replaying journal segment 17",
            "ledger: stopped after segment 17",
        ],
    );
    assert_eq!(f.diagnosis.causes[0].class, FaultClass::Unknown);
}

/// A kill belongs to the run it ended: the death after the next start is
/// a failure of its own, and a requested death is not counted as one.
#[test]
fn a_kill_of_an_earlier_run_does_not_explain_a_later_death() {
    let events = [
        event(100, "start", None, ""),
        event(101, "die", Some(2), ""),
        event(103, "start", None, ""),
        event(106, "kill", None, "9"),
        event(106, "die", Some(137), ""),
        event(107, "start", None, ""),
        event(107, "die", Some(2), ""),
    ];
    assert_ne!(events::death(&events), events::Death::Requested(&events[3]));
    assert_eq!(
        events::failed_deaths(&events, 0).len(),
        2,
        "the kill's death is not a failure"
    );
}

/// The errno at the end of a line is its cause: a configuration that
/// cannot be written for a permission is a permission, and a JavaScript
/// TypeError is a crash, not a missing setting.
#[test]
fn the_most_specific_words_of_a_line_decide() {
    let dead = ContainerView {
        running: false,
        status: "exited".into(),
        exit_code: 1,
        ..view()
    };
    let f = run(&dead, &["Error: failed to load configuration: could not create config file: open /mattermost/config/config.json: permission denied"]);
    assert_eq!(
        f.diagnosis.causes[0].class,
        FaultClass::PermissionDenied,
        "{}",
        f.diagnosis.causes[0].reason
    );
    let f = run(
        &dead,
        &["31 Mar 15:53:53 - TypeError: Cannot read property 'statusCode' of undefined"],
    );
    assert_eq!(
        f.diagnosis.causes[0].class,
        FaultClass::Crash,
        "{}",
        f.diagnosis.causes[0].reason
    );
}

/// An error code shaped like a variable is not a missing setting.
#[test]
fn an_error_code_is_not_an_unset_variable() {
    let dead = ContainerView {
        running: false,
        status: "exited".into(),
        exit_code: 1,
        ..view()
    };
    let f = run(&dead, &["2023-11-23T20:35:57Z [SERVER] ERROR: Failed to prepare your database: ROLLBACK - SQLITE_ERROR: cannot rollback - no transaction is active"]);
    assert_ne!(
        f.diagnosis.causes[0].class,
        FaultClass::ConfigError,
        "{}",
        f.diagnosis.causes[0].reason
    );
}
