//! `drydock grant`: automation grants, made and signed on the operator's
//! side (where the approver key is), stored by the agent, enforced by the
//! executor at every use.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context as _};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::WriteAction;
use drydock_proto::grant::{
    self, GrantClaims, GrantScope, GRANT_KIND, GRANT_VERSION, GRANT_VERSION_NO_HOST,
};
use serde_json::json;

use crate::args::CreateArgs;
use crate::client::AgentClient;
use crate::home::{CliConfig, Home};
use crate::term::confirm;
use crate::text::{describe_time, safe};

/// `N/WINDOW`, like `2/1h`.
pub fn parse_max(text: &str) -> anyhow::Result<(u32, u64)> {
    let bad = || {
        format!("--max `{text}` is not N/WINDOW, like 2/1h (at most N repairs per container per WINDOW)")
    };
    let (n, window) = text.split_once('/').with_context(bad)?;
    let n: u32 = n.trim().parse().ok().filter(|n| *n > 0).with_context(bad)?;
    let window =
        drydock_daemon::duration::parse(window).map_err(|e| anyhow::anyhow!("{}: {e}", bad()))?;
    Ok((n, window.as_secs()))
}

/// The claims `create` would sign, checked as the executor will check them.
pub fn build(args: &CreateArgs, now: i64) -> anyhow::Result<GrantClaims> {
    let mut actions = Vec::new();
    for a in &args.actions {
        match WriteAction::parse(a) {
            Some(
                t2 @ (WriteAction::Stop
                | WriteAction::Rollback
                | WriteAction::ServiceRollback
                | WriteAction::ServiceUpdate),
            ) => {
                bail!(
                    "--action {t2}: {t2} is a T2 action, and a grant covers only start, restart, force_update and (alone, with --window) update"
                )
            }
            Some(action) if !actions.contains(&action) => actions.push(action),
            Some(_) => {}
            None => bail!("--action `{a}` is not start, restart, force_update or update"),
        }
    }
    let mut labels = BTreeMap::new();
    for l in &args.labels {
        let (k, v) = l
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .with_context(|| format!("--label `{l}` is not KEY=VALUE"))?;
        labels.insert(k.to_string(), v.to_string());
    }
    let (max_per_container, window_secs) = parse_max(&args.max)?;
    let expires = drydock_daemon::duration::parse(&args.expires)
        .map_err(|e| anyhow::anyhow!("--expires: {e}"))?;
    let claims = GrantClaims {
        // `checked` names the executor's host when it has one.
        version: GRANT_VERSION_NO_HOST,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions,
        scope: GrantScope {
            names: args.names.clone(),
            labels,
            projects: args.projects.clone(),
            stacks: args.stacks.clone(),
        },
        classes: args.classes.clone(),
        max_per_container,
        window_secs,
        max_total: args
            .max_total
            .unwrap_or(max_per_container.saturating_mul(10)),
        issued_at: now,
        expires_at: now.saturating_add(i64::try_from(expires.as_secs()).unwrap_or(i64::MAX)),
        host: None,
        hours: args.window.clone(),
    };
    if actions_are_update(&claims) && claims.hours.is_none() {
        bail!("--action update needs --window HH:MM-HH:MM: the hours it may update in, the executor host's local time (like 02:00-05:00)");
    }
    claims.check_shape().map_err(|e| {
        anyhow::anyhow!("{e}").context("the grant would be refused; nothing was signed")
    })?;
    Ok(claims)
}

fn actions_are_update(c: &GrantClaims) -> bool {
    c.actions.contains(&WriteAction::Update)
}

/// The grant in words, for the person about to sign it.
pub fn describe(c: &GrantClaims, now: i64) -> String {
    let mut scope = Vec::new();
    if !c.scope.projects.is_empty() {
        scope.push(format!("compose project {}", c.scope.projects.join(" or ")));
    }
    if !c.scope.stacks.is_empty() {
        scope.push(format!("Swarm stack {}", c.scope.stacks.join(" or ")));
    }
    if !c.scope.names.is_empty() {
        scope.push(format!("names matching {}", c.scope.names.join(" or ")));
    }
    if !c.scope.labels.is_empty() {
        let l: Vec<String> = c
            .scope
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        scope.push(format!("labels {}", l.join(", ")));
    }
    let actions: Vec<&str> = c.actions.iter().map(|a| a.as_str()).collect();
    // A stack names services, a compose project containers; names and
    // labels alone match both (a force update acts on services).
    let on_services = c.actions.iter().any(|a| a.on_service());
    let kinds = if !c.scope.stacks.is_empty() {
        ("services", "service")
    } else if !c.scope.projects.is_empty() || !on_services {
        ("containers", "container")
    } else {
        ("containers and Swarm services", "container or service")
    };
    let (purpose, when) = if actions_are_update(c) {
        (
            "to the image its tag names in an allowed registry, restored by the executor when the new one fails its health window".to_string(),
            "only when the registry's digest for the tag is the one asked for (checked by the executor)".to_string(),
        )
    } else {
        (
            format!(
                "for {}",
                if c.classes.is_empty() {
                    "any fault class".to_string()
                } else {
                    format!("faults classed {}", safe(&c.classes.join(", ")))
                }
            ),
            format!(
                "only when the {} is really broken at that moment (checked by the executor)",
                kinds.1
            ),
        )
    };
    let hours = c
        .hours
        .as_ref()
        .map(|h| {
            format!(
                "\n  only between {} (the executor host's local time)",
                safe(h)
            )
        })
        .unwrap_or_default();
    format!(
        "grant {id}\n  may {actions} {what}{on} with {scope}\n  {purpose}\n  at most {n} per {one} every {w}, {total} in all{hours}\n  {when}\n  expires {exp}",
        what = kinds.0,
        on = c
            .host
            .as_ref()
            .map(|h| format!(" on host {}", safe(h)))
            .unwrap_or_default(),
        one = kinds.1,
        id = safe(&c.grant_id),
        actions = actions.join(" or "),
        scope = safe(&scope.join(" and ")),
        n = c.max_per_container,
        w = humantime::format_duration(Duration::from_secs(c.window_secs)),
        total = c.max_total,
        exp = describe_time(c.expires_at, now),
    )
}

/// Build the grant and refuse, before anything is signed, what the
/// executor would refuse; returns it with notes for the person (automation
/// off). Shared by `grant create` and the console.
pub async fn checked(
    agent: &AgentClient,
    args: &CreateArgs,
    now: i64,
) -> anyhow::Result<(GrantClaims, Vec<String>)> {
    let mut claims = build(args, now)?;
    let path = match &args.host {
        Some(h) if drydock_proto::approval::is_host_name(h) => format!("/api/v1/executor?host={h}"),
        Some(h) => bail!(
            "--host `{}` is not a host name (lowercase letters, digits, `-` and `.`); `drydock doctor` lists the agent's hosts",
            safe(h)
        ),
        None => "/api/v1/executor".to_string(),
    };
    let executor = agent
        .get(&path)
        .await
        .context("the grant is checked against the executor's policy, through the agent")?;
    if let (None, Some(hosts)) = (&args.host, executor["hosts"].as_array()) {
        let names: Vec<&str> = hosts.iter().filter_map(|h| h["name"].as_str()).collect();
        if names.len() > 1 {
            bail!(
                "the agent serves several hosts ({}); a grant is honoured by one host's executor only: add --host NAME",
                names.iter().map(|n| safe(n)).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let policy = &executor["policy"];
    let named = policy["host"].as_str().is_some_and(|h| !h.is_empty());
    if let (Some(h), false) = (&args.host, named) {
        bail!(
            "host {}'s executor has no host.name, so a grant for it would name no host and any executor that does not require one would honour it: give that executor `host: {{name: {}, require: true}}` (drydock host add writes it)",
            safe(h),
            safe(h)
        );
    }
    // Made for the executor's host, when it has a name: every other
    // executor refuses it.
    if let Some(host) = policy["host"].as_str().filter(|h| !h.is_empty()) {
        claims.host = Some(host.to_string());
        claims.version = GRANT_VERSION;
        claims.check_shape().map_err(|e| {
            anyhow::anyhow!("{e}").context("the grant would be refused; nothing was signed")
        })?;
    }
    let max_ttl = policy["max_grant_ttl_secs"].as_u64().unwrap_or(0);
    let lifetime = (claims.expires_at - claims.issued_at) as u64;
    if max_ttl > 0 && lifetime > max_ttl {
        bail!(
            "--expires {} is longer than the executor's automation.max_grant_ttl of {}: it would refuse the grant",
            args.expires,
            humantime::format_duration(Duration::from_secs(max_ttl))
        );
    }
    let mut notes = Vec::new();
    if policy["automation_enabled"].as_bool() != Some(true) {
        notes.push("note: the executor has automation off (automation.enabled: false); the grant authorises nothing until its operator turns it on".to_string());
    }
    Ok((claims, notes))
}

/// Sign exactly these claims with the approver key and give them to the agent.
pub async fn sign_and_store(
    agent: &AgentClient,
    cfg: &CliConfig,
    claims: &GrantClaims,
) -> anyhow::Result<()> {
    let bytes = claims.encode();
    let key = cfg.signing_key()?;
    let signature = grant::sign(&bytes, &key);
    agent
        .post(
            "/api/v1/grants",
            json!({"claims": B64.encode(&bytes), "signature": B64.encode(signature), "key_id": cfg.approver.id}),
        )
        .await?;
    Ok(())
}

pub async fn create(agent: &AgentClient, cfg: &CliConfig, args: &CreateArgs) -> anyhow::Result<u8> {
    let now = crate::text::unix_now();
    let (claims, notes) = checked(agent, args, now).await?;
    println!("{}", describe(&claims, now));
    for note in notes {
        println!("{note}");
    }
    if !args.yes && !confirm("Sign this grant with your approver key?").await {
        println!("not signed; nothing was stored");
        return Ok(crate::exit::REJECTED);
    }
    sign_and_store(agent, cfg, &claims).await?;
    println!("{}", claims.grant_id);
    Ok(crate::exit::COMPLETED)
}

pub async fn list(agent: &AgentClient, json_out: bool) -> anyhow::Result<u8> {
    let list = agent.grants().await?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(crate::exit::COMPLETED);
    }
    if list.grants.is_empty() {
        println!("no grants");
    }
    let now = crate::text::unix_now();
    for row in &list.grants {
        println!(
            "[{}] {}",
            row.status.as_str(),
            describe(&row.grant.claims, now)
        );
    }
    if list.executor_automation_enabled == Some(false) {
        println!("note: the executor has automation off; no grant authorises anything");
    }
    Ok(crate::exit::COMPLETED)
}

/// Revoke at the executor (its list is what refuses the grant) and in the
/// agent (so it is no longer offered); returns what was done, in words.
pub async fn revoke_quietly(home: &Home, agent: &AgentClient, id: &str) -> anyhow::Result<String> {
    let mut said = String::new();
    let executor_config = home.executor_config();
    if executor_config.is_file() {
        let bin = crate::daemons::find_binary("drydock-executor").context(
            "drydock-executor not found (looked at $DRYDOCK_EXECUTOR_BIN, next to drydock, and on PATH)",
        )?;
        let out = std::process::Command::new(bin)
            .args(["grant", "revoke", "--config"])
            .arg(&executor_config)
            .arg(id)
            .output()
            .context("cannot run drydock-executor")?;
        if !out.status.success() {
            bail!(
                "the executor's revocation list was not changed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        said.push_str(&String::from_utf8_lossy(&out.stdout));
    } else {
        said.push_str(&format!(
            "the executor's config is not in this home: on the executor's host, run\n  drydock-executor grant revoke --config /etc/drydock/executor.yaml {}\n(until then the executor still honours the grant)\n",
            safe(id)
        ));
    }
    match agent.delete(&format!("/api/v1/grants/{id}")).await {
        Ok(_) => said.push_str(&format!("the agent no longer offers {}", safe(id))),
        Err(e) => said.push_str(&format!(
            "the agent was not told ({e:#}); the executor refuses the grant anyway"
        )),
    }
    Ok(said)
}

pub async fn revoke(home: &Home, agent: &AgentClient, id: &str) -> anyhow::Result<u8> {
    println!("{}", revoke_quietly(home, agent, id).await?);
    Ok(crate::exit::COMPLETED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> CreateArgs {
        CreateArgs {
            actions: vec!["restart".into()],
            projects: vec!["shop".into()],
            max: "2/1h".into(),
            expires: "7d".into(),
            ..Default::default()
        }
    }

    type Change = Box<dyn Fn(&mut CreateArgs)>;

    #[test]
    fn a_grant_is_built_from_flags_and_bad_flags_say_what_is_wrong() {
        let c = build(&args(), 1_000).unwrap();
        assert_eq!(
            (c.max_per_container, c.window_secs, c.max_total),
            (2, 3600, 20)
        );
        assert_eq!(c.expires_at, 1_000 + 7 * 86_400);
        let text = describe(&c, 1_000);
        assert!(
            text.contains("compose project shop")
                && text.contains("at most 2 per container every 1h"),
            "{text}"
        );
        // Names alone with a force update cover Swarm services too: said.
        let mut named = args();
        named.projects.clear();
        named.names = vec!["shop*".into()];
        named.actions = vec!["restart".into(), "force_update".into()];
        let text = describe(&build(&named, 1_000).unwrap(), 1_000);
        assert!(
            text.contains("may restart or force_update containers and Swarm services"),
            "{text}"
        );
        // An update grant says its hours and what the executor checks.
        let mut nightly = args();
        nightly.actions = vec!["update".into()];
        nightly.window = Some("02:00-05:00".into());
        let text = describe(&build(&nightly, 1_000).unwrap(), 1_000);
        assert!(
            text.contains("may update containers")
                && text.contains("only between 02:00-05:00 (the executor host's local time)")
                && text.contains("restored by the executor")
                && !text.contains("fault class"),
            "{text}"
        );
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|a| a.actions = vec!["stop".into()]), "T2"),
            (
                Box::new(|a| a.actions = vec!["rm".into()]),
                "is not start, restart, force_update or update",
            ),
            (
                Box::new(|a| a.actions = vec!["update".into()]),
                "needs --window",
            ),
            (
                Box::new(|a| {
                    a.actions = vec!["update".into()];
                    a.window = Some("2am-5am".into());
                }),
                "HH:MM-HH:MM",
            ),
            (
                Box::new(|a| {
                    a.actions = vec!["update".into(), "restart".into()];
                    a.window = Some("02:00-05:00".into());
                }),
                "update alone",
            ),
            (Box::new(|a| a.max = "2".into()), "N/WINDOW"),
            (Box::new(|a| a.max = "0/1h".into()), "N/WINDOW"),
            (Box::new(|a| a.expires = "soon".into()), "--expires"),
            (Box::new(|a| a.projects.clear()), "no selector"),
            (Box::new(|a| a.labels = vec!["novalue".into()]), "KEY=VALUE"),
            (
                Box::new(|a| a.classes = vec!["bad_luck".into()]),
                "not a fault class",
            ),
            (Box::new(|a| a.names = vec!["*".into()]), "`*`"),
        ];
        for (change, says) in cases {
            let mut a = args();
            change(&mut a);
            let err = format!("{:#}", build(&a, 1_000).unwrap_err());
            assert!(err.contains(says), "{says}: {err}");
        }
    }
}
