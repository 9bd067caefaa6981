use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use mcpgw_authz::{
    RateLimitCaller, RateLimitFailMode, RateLimitKey, RateLimitPolicy, RateLimitScope,
};

use super::{Error, RedisRateLimiter, RedisSettings, masked_url, redacted, redis_key};

fn rest(caller: &RateLimitCaller) -> RateLimitKey<'_> {
    RateLimitKey {
        scope: RateLimitScope::Rest,
        caller,
        tool: None,
    }
}

#[test]
fn keys_name_scope_caller_and_tool_inside_the_namespace() {
    let alice = RateLimitCaller::Principal("user:alice".to_owned());
    assert_eq!(redis_key(&rest(&alice)), "mcpgw:rl:{r%1Fp:user:alice}");
    let tool = RateLimitKey {
        scope: RateLimitScope::ToolCall,
        caller: &alice,
        tool: Some("math__add"),
    };
    assert_eq!(redis_key(&tool), "mcpgw:rl:{t%1Fp:user:alice%1Fmath__add}");
    let address = RateLimitCaller::Address(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)));
    assert_eq!(redis_key(&rest(&address)), "mcpgw:rl:{r%1Fa:10.0.0.7}");
    assert_eq!(
        redis_key(&rest(&RateLimitCaller::Unknown)),
        "mcpgw:rl:{r%1Fu:}"
    );
}

#[test]
fn odd_bytes_in_a_principal_are_escaped_and_never_collide() {
    // Bad input: principals with spaces, line breaks, braces, glob characters, the escape
    // character itself, the separator byte, multi-byte characters, and a kilobyte of them.
    let odd = [
        "user:a b",
        "user:a\r\nDEL *",
        "user:}{evil}",
        "user:*?[]",
        "user:%1F",
        "user:\u{1f}",
        "user:é",
        &"x\n".repeat(512),
    ];
    let mut seen = std::collections::HashSet::new();
    for principal in odd {
        let caller = RateLimitCaller::Principal(principal.to_owned());
        let key = redis_key(&rest(&caller));
        let inner = key
            .strip_prefix("mcpgw:rl:{")
            .and_then(|rest| rest.strip_suffix('}'))
            .unwrap_or_else(|| panic!("{key:?} is outside the namespace"));
        assert!(
            inner
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b":._-@/%".contains(&byte)),
            "{key:?} holds a byte that is not escaped"
        );
        assert!(seen.insert(key.clone()), "{principal:?} shares {key:?}");
    }
    // `%` is escaped too, so a name that spells an escape is not the byte it spells.
    let spelled = redis_key(&rest(&RateLimitCaller::Principal("user:%1F".to_owned())));
    assert_eq!(spelled, "mcpgw:rl:{r%1Fp:user:%251F}");
}

#[test]
fn passwords_are_masked_in_urls_and_redacted_from_messages() {
    assert_eq!(
        masked_url("redis://:s3cret@redis.internal:6379/0"),
        "redis://:***@redis.internal:6379/0"
    );
    assert_eq!(
        masked_url("redis://gateway:s3cret@host/2"),
        "redis://gateway:***@host/2"
    );
    assert_eq!(masked_url("redis://host:6379"), "redis://host:6379");
    assert_eq!(masked_url("redis://user@host"), "redis://user@host");
    // Bad input: no scheme at all, and an `@` after the authority.
    assert_eq!(masked_url("not a url"), "not a url");
    assert_eq!(masked_url("redis://host/0?x=a@b"), "redis://host/0?x=a@b");

    let url = "redis://:p%40ss@host";
    assert_eq!(
        redacted("bad p%40ss and p@ss here", url),
        "bad *** and *** here"
    );
    assert_eq!(redacted("nothing secret", "redis://host"), "nothing secret");

    let settings = RedisSettings::new("redis://:s3cret@host");
    let shown = format!("{settings:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("redis://:***@host"), "{shown}");
}

#[test]
fn the_defaults_are_fifty_milliseconds_and_failing_open() {
    let settings = RedisSettings::new("redis://host");
    assert_eq!(settings.timeout, Duration::from_millis(50));
    assert_eq!(settings.on_unavailable, RateLimitFailMode::Open);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

const POLICY: RateLimitPolicy = RateLimitPolicy {
    requests_per_second: 10.0,
    burst: 20,
};

#[test]
fn settings_it_cannot_use_are_errors_that_keep_the_password_out() {
    let runtime = runtime();
    // Bad input: another scheme, TLS (not built in), a port that is no number, no URL at all.
    for url in [
        "http://:s3cret@host:6379",
        "rediss://:s3cret@host:6379",
        "redis://:s3cret@host:port",
        "not-a-url",
    ] {
        let error = runtime
            .block_on(RedisRateLimiter::connect(RedisSettings::new(url), POLICY))
            .expect_err(url);
        let message = error.to_string();
        assert!(
            matches!(error, Error::InvalidUrl { .. }),
            "{url}: {message}"
        );
        assert!(!message.contains("s3cret"), "{message}");
        assert!(message.contains("cannot be used"), "{message}");
    }
    // Bad input: a timeout of nothing.
    let mut settings = RedisSettings::new("redis://127.0.0.1:1");
    settings.timeout = Duration::ZERO;
    let error = runtime
        .block_on(RedisRateLimiter::connect(settings, POLICY))
        .expect_err("a zero timeout");
    assert!(matches!(error, Error::ZeroTimeout), "{error}");
}
