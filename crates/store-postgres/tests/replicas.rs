//! What only a shared PostgreSQL database adds to the state ports: replicas that see each
//! other's writes, API keys that another replica revokes, the notification each write sends
//! (and only once it commits), and byte order whatever the database's collation.

use std::time::{Duration, Instant};

use mcpgw_authz::{AuthStore, KeyHash, KeyId, UserStore};
use mcpgw_core::{ServerId, ServerRepository, Timestamp, ToolListStore};
use mcpgw_discovery::DiscoveryStore;
use mcpgw_groups::GroupRepository;
use mcpgw_store_postgres::{
    CHANNEL, PostgresDiscoveryStore, PostgresSettings, PostgresStore, PostgresToolListStore, Topic,
};
use mcpgw_testkit::auth_store::{
    SAMPLE_TIME, sample_assignment, sample_key, sample_policy, sample_role,
};
use mcpgw_testkit::discovery_store_suite::{sample_rejection, sample_source};
use mcpgw_testkit::group_repository_suite::sample_group;
use mcpgw_testkit::postgres::TempPostgres;
use mcpgw_testkit::repository_suite::{sample_remote_spec, sample_subprocess_spec};
use mcpgw_testkit::tool_list_store_suite::sample_tool_list;
use mcpgw_testkit::user_store::{sample_password_hash, sample_user, sample_user_name};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};

/// How long a notification may take to arrive before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// A new, empty database of the shared server: its URL and its name.
fn fresh_database() -> (String, String) {
    let url = TempPostgres::shared().fresh_database();
    let name = url.rsplit('/').next().expect("a database name").to_owned();
    (url, name)
}

async fn connect(url: &str) -> PostgresStore {
    PostgresStore::connect(PostgresSettings::new(url))
        .await
        .unwrap_or_else(|error| panic!("connecting a replica failed: {error}"))
}

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn seconds(offset: i64) -> Timestamp {
    Timestamp::from_unix_micros(SAMPLE_TIME.unix_micros() + offset * 1_000_000)
}

// ----- two replicas -------------------------------------------------------------------------

/// Every port's write through one replica is read by another replica on the same database,
/// deletions included.
#[tokio::test]
async fn a_write_on_one_replica_is_read_by_another() {
    let (url, _) = fresh_database();
    let writer = connect(&url).await;
    let reader = connect(&url).await;

    let server = sample_subprocess_spec("math");
    ServerRepository::save(&writer, &server).await.unwrap();
    GroupRepository::save(&writer, &sample_group("pool"))
        .await
        .unwrap();
    let lists = PostgresToolListStore::new(writer.clone());
    lists
        .save_tool_lists(&[sample_tool_list("math")])
        .await
        .unwrap();
    let discovery = PostgresDiscoveryStore::new(writer.clone());
    discovery
        .save_source(&sample_source("docker-0"))
        .await
        .unwrap();
    discovery
        .save_rejection(&sample_rejection("docker-0", "web"))
        .await
        .unwrap();
    let alice = sample_user("alice", SAMPLE_TIME);
    assert!(writer.insert_user(&alice).await.unwrap());
    assert!(
        writer
            .insert_custom_role(&sample_role("support"))
            .await
            .unwrap()
    );
    let assignment = sample_assignment("user:alice", "support", "global");
    assert!(writer.insert_assignment(&assignment).await.unwrap());
    let policy = sample_policy("provider", "math");
    writer.put_policy(&policy).await.unwrap();

    assert_eq!(ServerRepository::load_all(&reader).await.unwrap(), [server]);
    assert_eq!(
        GroupRepository::load_all(&reader).await.unwrap(),
        [sample_group("pool")]
    );
    assert_eq!(
        PostgresToolListStore::new(reader.clone())
            .load_tool_lists()
            .await
            .unwrap(),
        [sample_tool_list("math")]
    );
    let other_discovery = PostgresDiscoveryStore::new(reader.clone());
    assert_eq!(
        other_discovery.load_sources().await.unwrap(),
        [sample_source("docker-0")]
    );
    assert_eq!(
        other_discovery.load_rejections().await.unwrap(),
        [sample_rejection("docker-0", "web")]
    );
    assert_eq!(reader.user(&alice.name).await.unwrap(), Some(alice.clone()));
    assert_eq!(
        reader.custom_roles().await.unwrap(),
        [sample_role("support")]
    );
    assert_eq!(reader.assignments().await.unwrap(), [assignment]);
    assert_eq!(reader.policies().await.unwrap(), [policy]);

    // And back: the reader deletes, the writer sees it.
    ServerRepository::delete(&reader, &id("math"))
        .await
        .unwrap();
    GroupRepository::delete(&reader, &id("pool")).await.unwrap();
    assert!(reader.delete_user(&alice.name).await.unwrap());
    assert_eq!(ServerRepository::load_all(&writer).await.unwrap(), []);
    assert_eq!(GroupRepository::load_all(&writer).await.unwrap(), []);
    assert_eq!(writer.users().await.unwrap(), []);
}

/// Key lookups come from memory: a key created or revoked on another replica is not seen
/// until `refresh_keys`, and after it a revoked key is refused.
#[tokio::test]
async fn a_key_revoked_on_another_replica_is_refused_after_a_refresh() {
    let (url, _) = fresh_database();
    let gateway = connect(&url).await;
    let other = connect(&url).await;
    let key = sample_key("shared", seconds(0));
    gateway.insert_key(&key).await.unwrap();
    let now = seconds(60);

    // Created here, read by the other replica after its refresh.
    assert_eq!(other.key_by_hash(&key.hash).await.unwrap(), None);
    other.refresh_keys().await.unwrap();
    assert_eq!(
        other.key_by_hash(&key.hash).await.unwrap(),
        Some(key.clone())
    );

    let revoked = other
        .revoke_key(&key.id, seconds(30))
        .await
        .unwrap()
        .expect("the key exists");
    assert_eq!(revoked.revoked_at, Some(seconds(30)));
    // The other replica's own memory knows at once.
    let there = other.key_by_hash(&key.hash).await.unwrap().unwrap();
    assert!(there.check(&key.hash, now).is_err());

    // This replica still answers from memory, until it refreshes.
    let before = gateway.key_by_hash(&key.hash).await.unwrap().unwrap();
    assert_eq!(before.revoked_at, None);
    gateway.refresh_keys().await.unwrap();
    let after = gateway.key_by_hash(&key.hash).await.unwrap().unwrap();
    assert_eq!(after, revoked);
    assert!(
        after.check(&key.hash, now).is_err(),
        "a key revoked on another replica is still accepted after a refresh"
    );
    assert_eq!(gateway.key_by_id(&key.id).await.unwrap(), Some(revoked));

    // A key created on the other replica is unknown here until the next refresh.
    let late = sample_key("late", seconds(1));
    other.insert_key(&late).await.unwrap();
    assert_eq!(gateway.key_by_hash(&late.hash).await.unwrap(), None);
    gateway.refresh_keys().await.unwrap();
    assert_eq!(gateway.key_by_hash(&late.hash).await.unwrap(), Some(late));
    assert_eq!(gateway.cached_api_keys(), 2);
}

/// A replica that connects later loads every key at connect.
#[tokio::test]
async fn a_replica_loads_every_key_when_it_connects() {
    let (url, _) = fresh_database();
    let first = connect(&url).await;
    let mut revoked = sample_key("revoked", seconds(0));
    revoked.revoked_at = Some(seconds(5));
    let active = sample_key("active", seconds(1));
    first.insert_key(&revoked).await.unwrap();
    first.insert_key(&active).await.unwrap();

    let second = connect(&url).await;
    assert_eq!(second.cached_api_keys(), 2);
    assert_eq!(
        second.key_by_hash(&revoked.hash).await.unwrap(),
        Some(revoked)
    );
    assert_eq!(second.key_by_id(&active.id).await.unwrap(), Some(active));
}

/// A caller that stops waiting for a key write does not stop it: the write commits once the
/// table is free, and this replica's memory of keys learns it as if the caller had waited.
#[tokio::test]
async fn a_key_write_the_caller_gave_up_on_still_reaches_the_cache() {
    let (url, _) = fresh_database();
    let store = connect(&url).await;
    // Another session holds a lock that makes inserts into `api_keys` wait.
    let (mut blocker, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let holding = blocker.transaction().await.unwrap();
    holding
        .batch_execute("LOCK TABLE api_keys IN SHARE ROW EXCLUSIVE MODE")
        .await
        .unwrap();

    let key = sample_key("abandoned", SAMPLE_TIME);
    let gave_up = tokio::time::timeout(Duration::from_millis(300), store.insert_key(&key)).await;
    assert!(gave_up.is_err(), "the insert did not wait for the lock");
    assert_eq!(store.keys().await.unwrap(), []);
    holding.rollback().await.unwrap();

    let deadline = Instant::now() + PATIENCE;
    while store.keys().await.unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the abandoned write never committed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Key writes take turns, so this one starts after the abandoned one taught the cache.
    let next = sample_key("next", SAMPLE_TIME);
    store.insert_key(&next).await.unwrap();
    assert_eq!(store.key_by_hash(&key.hash).await.unwrap(), Some(key));
    assert_eq!(store.key_by_hash(&next.hash).await.unwrap(), Some(next));
}

// ----- notifications ------------------------------------------------------------------------

/// A connection of its own that listens on the store's channel, as another replica would.
struct Listener {
    // Dropping the client closes the connection.
    client: tokio_postgres::Client,
    payloads: mpsc::UnboundedReceiver<String>,
}

impl Listener {
    async fn start(url: &str) -> Self {
        let (client, mut connection) = tokio_postgres::connect(url, NoTls)
            .await
            .unwrap_or_else(|error| panic!("the listener cannot connect: {error}"));
        let (sender, payloads) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match message {
                    Ok(AsyncMessage::Notification(notification))
                        if notification.channel() == CHANNEL =>
                    {
                        let _ = sender.send(notification.payload().to_owned());
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .unwrap_or_else(|error| panic!("LISTEN failed: {error}"));
        Self { client, payloads }
    }

    /// Sends a notification of its own, which arrives after those of every write that
    /// committed before it (PostgreSQL delivers in commit order), and waits for it: any
    /// notification that comes first fails the test.
    async fn expect_nothing_before_a_mark(&mut self, after: &str) {
        self.client
            .execute("SELECT pg_notify($1, 'mark')", &[&CHANNEL])
            .await
            .unwrap_or_else(|error| panic!("sending the mark failed: {error}"));
        assert_eq!(self.next().await, "mark", "a notification of {after}");
    }

    /// The next notification's payload; fails the test when none comes.
    async fn next(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.payloads.recv())
            .await
            .unwrap_or_else(|_| panic!("no notification within {PATIENCE:?}"))
            .expect("the listener's connection stays open")
    }

    /// Checks that the next notification is `topic`'s.
    async fn expect(&mut self, topic: Topic, after: &str) {
        let payload = self.next().await;
        assert_eq!(
            mcpgw_store_postgres::parse_payload(&payload).map(|(topic, _)| topic),
            Some(topic),
            "the notification of {after}: {payload}"
        );
    }
}

/// Every write that changes something sends its topic once it returned; writes that change
/// nothing and a write that fails send none (a mark sent after them is the next notification).
#[tokio::test]
async fn each_write_notifies_its_topic_and_no_op_writes_do_not() {
    let (url, _) = fresh_database();
    let store = connect(&url).await;
    let lists = PostgresToolListStore::new(store.clone());
    let discovery = PostgresDiscoveryStore::new(store.clone());
    let mut listener = Listener::start(&url).await;

    ServerRepository::save(&store, &sample_subprocess_spec("math"))
        .await
        .unwrap();
    listener.expect(Topic::Servers, "saving a server").await;
    ServerRepository::delete(&store, &id("math")).await.unwrap();
    listener.expect(Topic::Servers, "deleting a server").await;

    GroupRepository::save(&store, &sample_group("pool"))
        .await
        .unwrap();
    listener.expect(Topic::Groups, "saving a group").await;
    GroupRepository::delete(&store, &id("pool")).await.unwrap();
    listener.expect(Topic::Groups, "deleting a group").await;

    lists
        .save_tool_lists(&[sample_tool_list("math"), sample_tool_list("web")])
        .await
        .unwrap();
    listener.expect(Topic::ToolLists, "saving tool lists").await;
    lists.delete_tool_lists(&[id("math")]).await.unwrap();
    listener
        .expect(Topic::ToolLists, "deleting a tool list")
        .await;

    discovery
        .save_source(&sample_source("docker-0"))
        .await
        .unwrap();
    listener.expect(Topic::Discovery, "saving a source").await;
    discovery
        .save_rejection(&sample_rejection("docker-0", "web"))
        .await
        .unwrap();
    listener
        .expect(Topic::Discovery, "saving a rejection")
        .await;
    discovery.delete_rejection("docker-0", "web").await.unwrap();
    listener
        .expect(Topic::Discovery, "deleting a rejection")
        .await;
    discovery.delete_source("docker-0").await.unwrap();
    listener.expect(Topic::Discovery, "deleting a source").await;

    let alice = sample_user("alice", SAMPLE_TIME);
    assert!(store.insert_user(&alice).await.unwrap());
    listener.expect(Topic::Users, "inserting a user").await;
    assert!(
        store
            .set_password_hash(&alice.name, &sample_password_hash("new"), seconds(1))
            .await
            .unwrap()
    );
    listener.expect(Topic::Users, "changing a password").await;
    assert!(store.set_disabled(&alice.name, true).await.unwrap());
    listener.expect(Topic::Users, "disabling a user").await;

    let key = sample_key("k", SAMPLE_TIME);
    store.insert_key(&key).await.unwrap();
    listener.expect(Topic::Keys, "inserting a key").await;
    store.revoke_key(&key.id, seconds(2)).await.unwrap();
    listener.expect(Topic::Keys, "revoking a key").await;

    let role = sample_role("support");
    assert!(store.insert_custom_role(&role).await.unwrap());
    listener.expect(Topic::Access, "inserting a role").await;
    assert!(store.replace_custom_role(&role).await.unwrap());
    listener.expect(Topic::Access, "replacing a role").await;
    let assignment = sample_assignment("user:alice", "support", "global");
    assert!(store.insert_assignment(&assignment).await.unwrap());
    listener.expect(Topic::Access, "assigning a role").await;
    assert!(store.delete_assignment(&assignment).await.unwrap());
    listener
        .expect(Topic::Access, "removing an assignment")
        .await;
    let policy = sample_policy("tool", "math__add");
    store.put_policy(&policy).await.unwrap();
    listener.expect(Topic::Access, "setting a policy").await;
    assert!(store.delete_policy(policy.address()).await.unwrap());
    listener.expect(Topic::Access, "deleting a policy").await;
    assert!(store.delete_custom_role(role.name()).await.unwrap());
    listener.expect(Topic::Access, "deleting a role").await;

    // Writes that change nothing tell nobody.
    ServerRepository::delete(&store, &id("never-saved"))
        .await
        .unwrap();
    GroupRepository::delete(&store, &id("never-saved"))
        .await
        .unwrap();
    lists.save_tool_lists(&[]).await.unwrap();
    lists.delete_tool_lists(&[id("never-saved")]).await.unwrap();
    discovery.delete_source("never-saved").await.unwrap();
    discovery
        .delete_rejection("a", "never-saved")
        .await
        .unwrap();
    assert!(!store.insert_user(&alice).await.unwrap());
    assert!(
        !store
            .set_disabled(&sample_user_name("ghost"), true)
            .await
            .unwrap()
    );
    assert!(!store.delete_user(&sample_user_name("ghost")).await.unwrap());
    // A second revocation keeps the first time, so it changes nothing either.
    store.revoke_key(&key.id, seconds(9)).await.unwrap();
    assert_eq!(
        store
            .revoke_key(&KeyId::parse("key_ghost").unwrap(), seconds(9))
            .await
            .unwrap(),
        None
    );
    assert!(
        !store
            .replace_custom_role(&sample_role("ghost"))
            .await
            .unwrap()
    );
    assert!(!store.delete_assignment(&assignment).await.unwrap());
    assert!(!store.delete_policy(policy.address()).await.unwrap());
    // Bad input: a key whose id is taken. It fails and tells nobody.
    let impostor = mcpgw_authz::ApiKeyRecord {
        hash: KeyHash::of("another secret"),
        ..key.clone()
    };
    assert!(store.insert_key(&impostor).await.is_err());

    listener
        .expect_nothing_before_a_mark("a write that changed nothing or failed")
        .await;
}

/// Installs, behind the store's back, a check that PostgreSQL runs at commit (a deferred
/// constraint trigger) and that refuses rows of `table` whose `column` is `refused`.
fn refuse_at_commit(database: &str, table: &str, column: &str, refused: &str) {
    TempPostgres::shared().psql(
        database,
        &format!(
            "CREATE FUNCTION refuse_{table}() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.{column} = '{refused}' THEN
                     RAISE EXCEPTION 'refused at commit';
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE CONSTRAINT TRIGGER refuse_{table} AFTER INSERT OR UPDATE ON {table}
                 DEFERRABLE INITIALLY DEFERRED
                 FOR EACH ROW EXECUTE FUNCTION refuse_{table}();"
        ),
    );
}

/// A write whose commit fails has sent its notification inside the transaction: PostgreSQL
/// must drop it, the caller gets an error, and the key cache does not learn the key.
#[tokio::test]
async fn a_write_whose_commit_fails_notifies_nobody_and_leaves_the_cache_alone() {
    let (url, database) = fresh_database();
    let store = connect(&url).await;
    refuse_at_commit(&database, "mcp_servers", "id", "doomed");
    refuse_at_commit(&database, "api_keys", "name", "doomed");
    let mut listener = Listener::start(&url).await;

    // Bad input (for this database): rows its commit check refuses.
    let error = ServerRepository::save(&store, &sample_remote_spec("doomed"))
        .await
        .unwrap_err();
    assert!(error.0.contains("save the mcp server"), "{error}");
    let doomed_key = mcpgw_authz::ApiKeyRecord {
        name: "doomed".to_owned(),
        ..sample_key("doomed", SAMPLE_TIME)
    };
    let error = store.insert_key(&doomed_key).await.unwrap_err();
    assert!(error.0.contains("store the api key"), "{error}");
    assert!(!error.0.contains(&doomed_key.hash.to_hex()), "{error}");
    assert_eq!(store.key_by_hash(&doomed_key.hash).await.unwrap(), None);
    assert_eq!(store.key_by_id(&doomed_key.id).await.unwrap(), None);

    let fine = sample_key("fine", SAMPLE_TIME);
    store.insert_key(&fine).await.unwrap();
    listener
        .expect(Topic::Keys, "the first write that committed")
        .await;
    ServerRepository::save(&store, &sample_remote_spec("fine"))
        .await
        .unwrap();
    listener.expect(Topic::Servers, "saving a server").await;
    assert_eq!(
        ServerRepository::load_all(&store).await.unwrap(),
        [sample_remote_spec("fine")]
    );
    assert_eq!(store.keys().await.unwrap(), [fine]);
}

// ----- byte order ---------------------------------------------------------------------------

/// On a database whose default collation is a natural-language one (where "Zed" sorts after
/// "alice"), lists still come back in byte order, as the ports ask.
#[tokio::test]
async fn lists_are_in_byte_order_whatever_the_database_collation() {
    let postgres = TempPostgres::shared();
    let (_, admin) = fresh_database();
    let database = format!("{admin}_icu");
    postgres.psql(
        &admin,
        &format!(
            "CREATE DATABASE {database} TEMPLATE template0 ENCODING 'UTF8' \
             LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"
        ),
    );
    // The database's own order is not byte order, so the test means something.
    let natural = postgres.psql(
        &database,
        "SELECT string_agg(name, ',' ORDER BY name) FROM (VALUES ('alice'), ('Zed')) AS t(name)",
    );
    assert_eq!(natural.trim(), "alice,Zed");

    let store = connect(&postgres.url(&database)).await;
    for name in ["alice", "Zed", "_svc", "bob"] {
        assert!(
            store
                .insert_user(&sample_user(name, SAMPLE_TIME))
                .await
                .unwrap()
        );
        ServerRepository::save(&store, &sample_remote_spec(name))
            .await
            .unwrap();
        GroupRepository::save(&store, &sample_group(name))
            .await
            .unwrap();
    }
    let users: Vec<String> = store
        .users()
        .await
        .unwrap()
        .iter()
        .map(|user| user.name.to_string())
        .collect();
    assert_eq!(users, ["Zed", "_svc", "alice", "bob"]);
    let groups: Vec<String> = GroupRepository::load_all(&store)
        .await
        .unwrap()
        .iter()
        .map(|group| group.id.to_string())
        .collect();
    assert_eq!(groups, ["Zed", "_svc", "alice", "bob"]);
    let servers: Vec<String> = ServerRepository::load_all(&store)
        .await
        .unwrap()
        .iter()
        .map(|server| server.id.to_string())
        .collect();
    assert_eq!(servers, ["Zed", "_svc", "alice", "bob"]);
    // Keys created in the same microsecond are listed by id, in byte order too.
    for label in ["b", "B", "a"] {
        store
            .insert_key(&sample_key(label, SAMPLE_TIME))
            .await
            .unwrap();
    }
    let ids: Vec<String> = store
        .keys()
        .await
        .unwrap()
        .iter()
        .map(|key| key.id.to_string())
        .collect();
    assert_eq!(ids, ["key_B", "key_a", "key_b"]);
}
