//! Copies a child's stderr into its log buffer, one line at a time, in bounded memory.

use std::sync::Arc;

use mcpgw_core::{LogBuffer, LogLineSplitter};
use tokio::io::{AsyncRead, AsyncReadExt};

const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Reads `stderr` to its end and pushes each line into `logs`.
///
/// It reads as fast as the child writes, whatever the lines look like, so that a chatty or
/// broken server never blocks on a full stderr pipe.
pub(crate) async fn capture_stderr<R>(mut stderr: R, logs: Arc<LogBuffer>)
where
    R: AsyncRead + Unpin,
{
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut lines = LogLineSplitter::default();
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) => break,
            Ok(read) => lines.feed(&chunk[..read], |line| logs.push_raw(line)),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(
                    server_id = %logs.server_id(),
                    %error,
                    "stopped reading the server's stderr"
                );
                break;
            }
        }
    }
    lines.finish(|line| logs.push_raw(line));
}
