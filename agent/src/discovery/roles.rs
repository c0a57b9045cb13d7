//! What people call a container by what it does, and what runs it.

/// Role words people use, and what containers playing that role run
/// (image or compose service names).
pub(super) const ROLES: &[(&[&str], &[&str])] = &[
    (
        &["database", "databases", "db", "sql", "datastore"],
        &[
            "postgres",
            "postgresql",
            "mysql",
            "mariadb",
            "mongo",
            "mongodb",
            "cockroach",
            "timescaledb",
            "percona",
            "mssql",
            "oracle",
        ],
    ),
    (
        &["cache", "caches", "kv"],
        &["redis", "memcached", "valkey", "keydb", "dragonfly"],
    ),
    (
        &["queue", "queues", "broker", "mq", "messaging", "bus"],
        &[
            "rabbitmq",
            "kafka",
            "nats",
            "activemq",
            "redpanda",
            "pulsar",
            "mosquitto",
        ],
    ),
    (
        &[
            "proxy",
            "gateway",
            "ingress",
            "lb",
            "balancer",
            "loadbalancer",
            "router",
        ],
        &["nginx", "traefik", "haproxy", "caddy", "envoy"],
    ),
    (
        &["webserver", "web-server", "httpd"],
        &["nginx", "httpd", "apache", "caddy", "lighttpd"],
    ),
    (
        &["search", "index"],
        &[
            "elasticsearch",
            "opensearch",
            "meilisearch",
            "solr",
            "typesense",
            "searx",
            "searxng",
            "zincsearch",
        ],
    ),
    (&["storage", "s3", "objectstore"], &["minio", "seaweedfs"]),
    (
        &[
            "sso", "identity", "idp", "login", "oauth", "oidc", "keycloak",
        ],
        &[
            "keycloak",
            "authentik",
            "authelia",
            "dex",
            "zitadel",
            "hydra",
        ],
    ),
    (
        &["git", "forge", "scm", "repos"],
        &["gitea", "gitlab", "forgejo", "gogs"],
    ),
    (
        &["discovery", "coordination", "consensus"],
        &["consul", "etcd", "zookeeper", "eureka"],
    ),
    (
        &[
            "password",
            "passwords",
            "password-manager",
            "passwordmanager",
            "vault",
        ],
        &["vaultwarden", "bitwarden", "passbolt", "vault"],
    ),
    (
        &["blog", "cms", "website", "site"],
        &["wordpress", "ghost", "drupal", "joomla"],
    ),
    (
        &["dashboard", "dashboards", "charts"],
        &["grafana", "kibana", "metabase", "superset"],
    ),
    (
        &["monitoring", "metrics", "alerting", "alerts"],
        &["prometheus", "alertmanager", "victoriametrics", "grafana"],
    ),
    (
        &["analytics", "statistics", "visitors", "pageviews"],
        &[
            "umami",
            "plausible",
            "matomo",
            "posthog",
            "fathom",
            "goatcounter",
        ],
    ),
    (
        &[
            "budget",
            "budgeting",
            "finance",
            "finances",
            "money",
            "expenses",
            "accounting",
        ],
        &[
            "firefly",
            "firefly-iii",
            "actual",
            "akaunting",
            "ihatemoney",
        ],
    ),
    (&["tv", "episodes"], &["sonarr", "medusa", "sickchill"]),
    (&["movies", "movie", "films", "film"], &["radarr"]),
    (
        &["api"],
        &["postgrest", "hasura", "graphql-engine", "postgraphile"],
    ),
    (
        &["jobs", "job", "tasks", "background"],
        &["worker", "workers", "sidekiq", "celery", "horizon", "queue"],
    ),
];
