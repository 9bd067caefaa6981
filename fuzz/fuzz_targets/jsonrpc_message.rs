//! Arbitrary bytes as JSON-RPC message lines, read the way the gateway reads them.
//!
//! From an upstream MCP server over stdio the gateway's client decodes each line with rmcp's
//! line codec into a `ServerJsonRpcMessage`; from a client (stdio mode, `/mcp`) its server
//! decodes `ClientJsonRpcMessage`s. The first byte picks how the rest arrives (the codec's
//! chunking and its line length limit); the rest is the byte stream. The tool lists and tool
//! results inside upstream answers are then converted the way the gateway converts them
//! (`Tool`, `CallToolResult`). Any input may be refused, never with a panic, and a message that
//! decodes must encode again, and settle after one relay.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, ListToolsResult, ServerJsonRpcMessage, Tool,
};
use rmcp::transport::async_rw::JsonRpcMessageCodec;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::codec::Decoder;

/// A decoded message encodes, its encoding decodes again, and from then on it is stable.
///
/// The first decoding may normalize: rmcp falls back to a custom notification or request for
/// params its typed model refuses (a duplicated key, say), and keeps fields that the typed
/// model would drop. So the first encoding may differ from the second, but the second is what
/// the gateway relays and it must survive further relays unchanged.
fn round_trips<T: Serialize + DeserializeOwned>(message: &T) {
    let decode = |encoded: &Value| -> T {
        match serde_json::from_value(encoded.clone()) {
            Ok(again) => again,
            Err(error) => panic!("an encoded message does not decode again ({error}): {encoded}"),
        }
    };
    let first = serde_json::to_value(message).expect("a decoded message encodes");
    let second = serde_json::to_value(decode(&first)).expect("a decoded message encodes");
    let third = serde_json::to_value(decode(&second)).expect("a decoded message encodes");
    assert_eq!(
        second, third,
        "a relayed message keeps changing when it is relayed again"
    );
}

/// Splits `stream` into chunks whose sizes come from `seed`, and decodes every line.
fn decode_stream<T: Serialize + DeserializeOwned>(seed: u8, stream: &[u8], max_length: usize) {
    let mut codec = JsonRpcMessageCodec::<T>::new_with_max_length(max_length);
    let mut buffer = BytesMut::new();
    let mut rest = stream;
    let mut step = usize::from(seed % 7) + 1;
    while !rest.is_empty() {
        let size = step.min(rest.len());
        buffer.extend_from_slice(&rest[..size]);
        rest = &rest[size..];
        step = step * 3 % 61 + 1;
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(message)) => round_trips(&message),
                Ok(None) => break,
                // The transport ends the connection on a codec error; the codec stays usable.
                Err(_) => {}
            }
            if buffer.is_empty() {
                break;
            }
        }
    }
    if let Ok(Some(message)) = codec.decode_eof(&mut buffer) {
        round_trips(&message);
    }
}

/// What the gateway does with a tool list or a tool result that an upstream sent.
fn convert_upstream_result(value: &Value) {
    if let Some(tools) = value.get("tools").and_then(Value::as_array) {
        for tool in tools {
            if let Ok(tool) = serde_json::from_value::<Tool>(tool.clone()) {
                round_trips(&tool);
            }
        }
    }
    if let Ok(list) = serde_json::from_value::<ListToolsResult>(value.clone()) {
        round_trips(&list);
    }
    if let Ok(result) = serde_json::from_value::<CallToolResult>(value.clone()) {
        round_trips(&result);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    // Unlimited as the gateway's transports use the codec, and a small limit that exercises
    // the codec's discarding of over-long lines.
    let max_length = if seed & 0x80 == 0 { usize::MAX } else { 64 };
    if seed & 0x40 == 0 {
        decode_stream::<ServerJsonRpcMessage>(seed, stream, max_length);
    } else {
        decode_stream::<ClientJsonRpcMessage>(seed, stream, max_length);
    }
    for line in stream.split(|&byte| byte == b'\n') {
        if let Ok(value) = serde_json::from_slice::<Value>(line)
            && let Some(result) = value.get("result")
        {
            convert_upstream_result(result);
        }
    }
});
