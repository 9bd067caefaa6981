//! Hearing what other replicas changed: a connection of its own that `LISTEN`s on the changes
//! channel and hands the topics over, reconnecting when the connection drops.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::changes::{CHANNEL, Topic, parse_payload};
use crate::store::{PostgresSettings, PostgresStore};

/// What the listener heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Another store (another replica) changed something under this topic, and committed.
    Topic(Topic),
    /// This store changed something under this topic: nothing to read again, but the change is
    /// committed (the event log's readers want their own replica's events too).
    Own(Topic),
    /// The listening connection was (re)established: notifications may have been missed while
    /// it was down, so everything should be read again. Also the first thing a new listener
    /// hands over once it listens.
    Listening,
}

/// The longest wait between two attempts to reconnect.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(5);

/// Listens for changes until dropped.
#[derive(Debug)]
pub struct ChangeListener {
    changes: mpsc::Receiver<Change>,
    task: tokio::task::JoinHandle<()>,
}

impl ChangeListener {
    /// The next change; `None` only after the listening task ended (it does not end by itself).
    pub async fn next(&mut self) -> Option<Change> {
        self.changes.recv().await
    }

    /// A change already heard, without waiting.
    pub fn try_next(&mut self) -> Option<Change> {
        self.changes.try_recv().ok()
    }
}

impl Drop for ChangeListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PostgresStore {
    /// Starts listening for the changes every replica announces (each write of this store
    /// announces its topic in its transaction). The listener keeps its own connection, outside
    /// the pool, and reconnects when it drops, handing over [`Change::Listening`] each time it
    /// listens again.
    pub fn listen(&self) -> ChangeListener {
        // Changes are coalesced by the reader; a full buffer only means it is behind, and one
        // `Listening` after a reconnect covers anything dropped then.
        let (sender, changes) = mpsc::channel(1024);
        let settings = (*self.settings).clone();
        let task = tokio::spawn(listen_forever(settings, Arc::clone(&self.origin), sender));
        ChangeListener { changes, task }
    }
}

async fn listen_forever(
    settings: PostgresSettings,
    origin: Arc<str>,
    sender: mpsc::Sender<Change>,
) {
    let mut delay = Duration::from_millis(100);
    loop {
        match listen_once(&settings, &origin, &sender).await {
            Ok(()) => return, // the receiver is gone
            Err(reason) => {
                tracing::warn!(
                    target = %settings.target(),
                    %reason,
                    retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "the connection that hears other replicas' changes is down; reconnecting"
                );
            }
        }
        if sender.is_closed() {
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RECONNECT_DELAY);
    }
}

/// Listens on one connection until it fails (`Err`) or nobody receives any more (`Ok`).
async fn listen_once(
    settings: &PostgresSettings,
    origin: &str,
    sender: &mpsc::Sender<Change>,
) -> Result<(), String> {
    let config = settings
        .driver_config()
        .map_err(|error| error.to_string())?;
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(|error| error.to_string())?;
    let (messages_sender, mut messages) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |context| connection.poll_message(context));
        while let Some(message) = stream.next().await {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    if messages_sender
                        .send(Ok(notification.payload().to_owned()))
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    let _ = messages_sender.send(Err(error.to_string()));
                    return;
                }
            }
        }
        let _ = messages_sender.send(Err("the server closed the connection".to_owned()));
    });
    let outcome = async {
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(|error| error.to_string())?;
        if sender.send(Change::Listening).await.is_err() {
            return Ok(());
        }
        while let Some(message) = messages.recv().await {
            let payload = message?;
            match parse_payload(&payload) {
                Some((topic, from)) => {
                    let change = if from == origin {
                        Change::Own(topic)
                    } else {
                        Change::Topic(topic)
                    };
                    if sender.send(change).await.is_err() {
                        return Ok(());
                    }
                }
                None => {
                    tracing::debug!(%payload, "ignoring a change notification of an unknown topic")
                }
            }
        }
        Err("the connection ended".to_owned())
    }
    .await;
    driver.abort();
    outcome
}
