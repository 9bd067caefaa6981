//! A launch mode of one's own, registered from outside the gateway's crates: `in_process`,
//! whose servers run inside the gateway's process instead of as a child process, a container
//! or a remote endpoint.
//!
//! A mode is two things: a [`LaunchMode`] (its name and the check of the `settings` a
//! definition in that mode carries) and a [`ServerLauncher`] that starts such a server and
//! hands back its [`McpSession`]. Registered with [`GatewayBuilder::with_launch_mode`], the
//! mode is accepted wherever a built-in one is: in the configuration file, in REST bodies
//! (with the same 422 errors naming the key), from discovery, in the stores and in exports.
//!
//! The server here is a greeter with two tools, `greet` and `echo`, configured by two
//! settings:
//!
//! ```yaml
//! mcp_servers:
//!   greeter:
//!     mode: in_process
//!     settings: {greeting: Hello, repeat: 2}
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, ExitStatusInfo, LaunchError, LaunchMode, LaunchSpec, LaunchedServer, LogBuffer,
    McpSession, ServerLauncher, ServerSpec, SessionError, SessionErrorKind, SettingsError, Tool,
    ToolCall, ToolCallOutcome,
};
use mcpgw_server::GatewayBuilder;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

/// The mode's name, as definitions write it: `mode: in_process`.
pub const MODE: &str = "in_process";

/// The most times a greeting may be repeated.
pub const MAX_REPEAT: u64 = 5;

/// What a greeter is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GreeterSettings {
    pub greeting: String,
    pub repeat: u64,
}

impl GreeterSettings {
    /// Reads the `settings` of a definition, or says which key is wrong and why.
    pub fn from_settings(settings: &Map<String, Value>) -> Result<Self, SettingsError> {
        if let Some(unknown) = settings
            .keys()
            .find(|key| !matches!(key.as_str(), "greeting" | "repeat"))
        {
            return Err(SettingsError::at(
                unknown.as_str(),
                "unknown setting; the settings are `greeting` and `repeat`",
            ));
        }
        let greeting = match settings.get("greeting") {
            Some(Value::String(greeting)) if !greeting.trim().is_empty() => greeting.clone(),
            Some(Value::String(_)) => {
                return Err(SettingsError::at("greeting", "must not be empty"));
            }
            Some(_) => return Err(SettingsError::at("greeting", "must be a string")),
            None => {
                return Err(SettingsError::new(
                    "missing key `greeting`: the words a greeter greets with, such as Hello",
                ));
            }
        };
        let repeat = match settings.get("repeat") {
            None => 1,
            Some(value) => value
                .as_u64()
                .filter(|repeat| (1..=MAX_REPEAT).contains(repeat))
                .ok_or_else(|| {
                    SettingsError::at(
                        "repeat",
                        format!("must be a whole number from 1 to {MAX_REPEAT}, got {value}"),
                    )
                })?,
        };
        Ok(Self { greeting, repeat })
    }
}

/// The mode as the configuration and the REST API see it: its name and its settings check.
pub fn launch_mode() -> LaunchMode {
    LaunchMode::new(MODE, |settings| {
        GreeterSettings::from_settings(settings).map(drop)
    })
    // The name is a constant that follows the naming rule.
    .unwrap_or_else(|error| unreachable!("{error}"))
}

/// `builder` with the `in_process` mode registered.
pub fn register(builder: GatewayBuilder) -> GatewayBuilder {
    builder.with_launch_mode(launch_mode(), Arc::new(InProcessLauncher))
}

/// Starts greeters: no process, no pipe, just a session object in this process.
#[derive(Debug, Default)]
pub struct InProcessLauncher;

#[async_trait]
impl ServerLauncher for InProcessLauncher {
    async fn launch(
        &self,
        spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        let LaunchSpec::Custom(custom) = &spec.launch else {
            return Err(LaunchError::UnsupportedMode(spec.mode().to_owned()));
        };
        // The definition passed the check when it was accepted; a stored one written under
        // other rules is refused here rather than run half-configured.
        let settings = GreeterSettings::from_settings(custom.settings())
            .map_err(|error| LaunchError::Other(error.to_string()))?;
        // What a process would write to stderr, the server's log shows.
        logs.push_raw(
            format!("greeter {} greets with {:?}", spec.id, settings.greeting).as_bytes(),
        );
        Ok(LaunchedServer {
            session: Arc::new(GreeterSession::new(settings)),
        })
    }
}

/// One running greeter.
pub struct GreeterSession {
    settings: GreeterSettings,
    calls: AtomicU64,
    closed: AtomicBool,
    ended: watch::Sender<bool>,
}

impl GreeterSession {
    pub fn new(settings: GreeterSettings) -> Self {
        Self {
            settings,
            calls: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            ended: watch::channel(false).0,
        }
    }

    fn refuse_when_closed(&self) -> Result<(), SessionError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SessionError::new(
                SessionErrorKind::Closed,
                "the greeter was stopped",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl McpSession for GreeterSession {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.refuse_when_closed()?;
        let mut greet = Tool::new("greet");
        greet.description = Some(format!(
            "Greets someone with \"{}\".",
            self.settings.greeting
        ));
        greet.input_schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Who to greet"}},
            "required": ["name"],
        });
        let mut echo = Tool::new("echo");
        echo.description = Some("Answers its text.".to_owned());
        echo.input_schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        });
        Ok(vec![greet, echo])
    }

    async fn call_tool(
        &self,
        call: ToolCall,
        _ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        self.refuse_when_closed()?;
        let argument = match call.name.as_str() {
            "greet" => "name",
            "echo" => "text",
            other => {
                return Err(SessionError::new(
                    SessionErrorKind::Protocol { code: -32602 },
                    format!("unknown tool: {other}"),
                ));
            }
        };
        let Some(value) = call
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get(argument))
            .and_then(Value::as_str)
        else {
            // A tool-level error: an answer the caller can read, not a failure of the server.
            return Ok(text_outcome(format!("`{argument}` must be a string"), true));
        };
        if call.name == "echo" {
            return Ok(text_outcome(value.to_owned(), false));
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        let one = format!("{}, {value}!", self.settings.greeting);
        let text = vec![one; usize::try_from(self.settings.repeat).unwrap_or(1)].join(" ");
        Ok(text_outcome(text, false))
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.refuse_when_closed()
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ended.send_replace(true);
    }

    async fn closed(&self) -> ExitStatusInfo {
        let mut ended = self.ended.subscribe();
        // The sender lives as long as the session, so the wait ends only by a close.
        let _ = ended.wait_for(|ended| *ended).await;
        ExitStatusInfo {
            description: format!(
                "the greeter was stopped after {} greetings",
                self.calls.load(Ordering::Relaxed)
            ),
            ..ExitStatusInfo::default()
        }
    }

    fn has_ended(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// A `CallToolResult` with one text block.
fn text_outcome(text: String, is_error: bool) -> ToolCallOutcome {
    ToolCallOutcome {
        result: json!({"content": [{"type": "text", "text": text}], "isError": is_error}),
        is_error,
    }
}
