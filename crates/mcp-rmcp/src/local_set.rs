//! Serving a request from a task of a [`tokio::task::LocalSet`].
//!
//! An actix worker runs a current-thread runtime and, inside it, a `LocalSet` whose tasks are
//! the connections and their request handlers. When a task of the runtime wakes a task of the
//! set, the runtime learns of it only as a wake-up of the set as a whole: it first looks at its
//! event loop once more (an `epoll_wait` that finds nothing, a system call per wake-up) and then
//! polls the set. One task of the set waking another, or a task of the runtime waking another of
//! the runtime, runs the woken task in the same turn. So the tasks a request hands work to (the
//! task that runs a tool call, the reader of a stdio server's answers) are best placed in the
//! set of the handler that waits for them.
//!
//! Whether a future runs in such a set cannot be asked of tokio; the code that polls it says so
//! by wrapping it in [`on_local_set`].

use std::future::Future;

use tokio::task::JoinHandle;

tokio::task_local! {
    /// Set while a future runs as (part of) a task of the [`tokio::task::LocalSet`] that the
    /// current thread is running; see [`on_local_set`].
    static ON_LOCAL_SET: ();
}

/// Runs `future`, which the caller promises is polled by a task of the
/// [`tokio::task::LocalSet`] its thread runs (as the handlers of an actix worker are), so that
/// the tasks it starts for a tool call, and the readers of the stdio servers it calls, run in
/// that set (see the module's documentation). Polling the returned future anywhere else is a
/// caller's error that makes starting those tasks panic.
pub async fn on_local_set<F: Future>(future: F) -> F::Output {
    ON_LOCAL_SET.scope((), future).await
}

/// Whether the current task runs inside [`on_local_set`].
pub(crate) fn on_local_set_now() -> bool {
    ON_LOCAL_SET.try_with(|()| ()).is_ok()
}

/// Starts `future` as a task of the current thread's `LocalSet` inside [`on_local_set`] (and
/// inside [`on_local_set`] again, since it runs in that set), and as a task of the current
/// runtime anywhere else.
pub(crate) fn spawn_here<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if on_local_set_now() {
        tokio::task::spawn_local(ON_LOCAL_SET.scope((), future))
    } else {
        tokio::spawn(future)
    }
}
