//! Feeding the invocation history from the event stream.

use std::sync::Arc;

use mcpgw_core::{EventObserver, InvocationHistory, InvocationRecord, PublishedEvent};

/// Records every tool invocation event into an [`InvocationHistory`].
pub struct HistoryRecorder {
    history: Arc<dyn InvocationHistory>,
}

impl HistoryRecorder {
    pub fn new(history: Arc<dyn InvocationHistory>) -> Self {
        Self { history }
    }
}

impl EventObserver for HistoryRecorder {
    fn observe(&self, published: &PublishedEvent) {
        if let Some(record) = InvocationRecord::from_event(published) {
            self.history.record(record);
        }
    }
}
