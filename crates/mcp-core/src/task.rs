//! Tasks (the 2026-07-28 tasks extension, `io.modelcontextprotocol/tasks`): a server may answer
//! a `tools/call` with a `CreateTaskResult` (`resultType: "task"`) instead of the result, and
//! the client follows the task with `tasks/get`, answers its questions with `tasks/update` and
//! stops it with `tasks/cancel`, naming it by its `taskId`.
//!
//! Through the gateway a task id names its owner too: each layer that routed the call puts the
//! id of what it routed to in front of the server's id (`{owner}/{task id}`, [`scoped_id`]),
//! and takes it off again to route the task's requests ([`split_scoped_id`]). Server ids
//! cannot contain the separator, so the split is unambiguous. A group routes the retry of an
//! input-required result back to its member the same way.

use serde_json::Value;

use crate::{ServerId, ToolCallOutcome};

/// The extension's id, as clients and servers declare it under `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `resultType` of a `CreateTaskResult`.
pub const TASK_RESULT: &str = "task";

/// The task methods a client sends about a task it holds.
pub const TASK_METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];

const SEPARATOR: char = '/';

impl ToolCallOutcome {
    /// Whether the server answered with a `CreateTaskResult`: the call goes on as a task.
    pub fn is_task(&self) -> bool {
        self.result.get("resultType").and_then(Value::as_str) == Some(TASK_RESULT)
    }
}

/// A `CreateTaskResult` with `owner` put in front of its `taskId`; other outcomes unchanged.
pub fn scope_task(mut outcome: ToolCallOutcome, owner: &ServerId) -> ToolCallOutcome {
    if !outcome.is_task() {
        return outcome;
    }
    if let Some(result) = outcome.result.as_object_mut()
        && let Some(Value::String(id)) = result.get("taskId")
    {
        let scoped = scoped_id(owner, id);
        result.insert("taskId".to_owned(), Value::String(scoped));
    }
    outcome
}

/// `id`, issued by what `owner` names, with `owner` in front: `{owner}/{id}`.
pub fn scoped_id(owner: &ServerId, id: &str) -> String {
    format!("{owner}{SEPARATOR}{id}")
}

/// The owner in front of a [`scoped_id`], and the rest; `None` when the id names no owner.
pub fn split_scoped_id(id: &str) -> Option<(ServerId, &str)> {
    let (owner, rest) = id.split_once(SEPARATOR)?;
    Some((ServerId::parse(owner).ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn owners_go_in_front_of_task_ids_and_come_off_again() {
        let id = |raw: &str| ServerId::parse(raw).unwrap();
        let task = ToolCallOutcome {
            result: json!({"resultType": "task", "taskId": "a/b", "status": "working"}),
            is_error: false,
        };
        let scoped = scope_task(scope_task(task, &id("member")), &id("group"));
        assert_eq!(scoped.result["taskId"], "group/member/a/b");
        let (group, rest) = split_scoped_id(scoped.result["taskId"].as_str().unwrap()).unwrap();
        assert_eq!((group, rest), (id("group"), "member/a/b"));
        let (member, upstream) = split_scoped_id(rest).unwrap();
        assert_eq!((member, upstream), (id("member"), "a/b"));
        // A complete result keeps its fields.
        let complete = ToolCallOutcome {
            result: json!({"content": [], "taskId": "x"}),
            is_error: false,
        };
        assert_eq!(scope_task(complete.clone(), &id("s")), complete);
        // Bad input: no owner, an owner that is no server id.
        assert_eq!(split_scoped_id("plain"), None);
        assert_eq!(split_scoped_id("not an id/x"), None);
    }
}
