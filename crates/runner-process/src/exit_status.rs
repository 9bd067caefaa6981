//! How a child's end is described to people and to the domain.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use mcpgw_core::ExitStatusInfo;

pub(crate) fn describe_exit(status: ExitStatus) -> ExitStatusInfo {
    if let Some(code) = status.code() {
        return ExitStatusInfo {
            code: Some(code),
            signal: None,
            description: format!("exited with code {code}"),
        };
    }
    if let Some(signal) = status.signal() {
        let mut description = format!("killed by signal {signal}");
        if let Some(name) = signal_name(signal) {
            description.push_str(&format!(" ({name})"));
        }
        if status.core_dumped() {
            description.push_str(", core dumped");
        }
        return ExitStatusInfo {
            code: None,
            signal: Some(signal),
            description,
        };
    }
    ExitStatusInfo {
        code: None,
        signal: None,
        description: format!("ended ({status})"),
    }
}

/// What `exited` answers when the process was abandoned before its exit could be observed,
/// which happens only when the tokio runtime that watched it shut down.
pub(crate) fn abandoned() -> ExitStatusInfo {
    ExitStatusInfo {
        code: None,
        signal: None,
        description: "killed when the gateway's runtime shut down".to_owned(),
    }
}

/// The names of the signals an operator is likely to meet in a server's exit status.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_and_signals_are_described() {
        // Raw wait statuses: the code sits in the second byte, a signal in the low seven bits.
        let exited = describe_exit(ExitStatus::from_raw(3 << 8));
        assert_eq!(exited.code, Some(3));
        assert_eq!(exited.signal, None);
        assert_eq!(exited.description, "exited with code 3");

        let killed = describe_exit(ExitStatus::from_raw(libc::SIGKILL));
        assert_eq!(killed.code, None);
        assert_eq!(killed.signal, Some(9));
        assert_eq!(killed.description, "killed by signal 9 (SIGKILL)");

        let crashed = describe_exit(ExitStatus::from_raw(libc::SIGSEGV | 0x80));
        assert_eq!(
            crashed.description,
            "killed by signal 11 (SIGSEGV), core dumped"
        );

        let unusual = describe_exit(ExitStatus::from_raw(libc::SIGRTMIN() + 1));
        assert_eq!(
            unusual.description,
            format!("killed by signal {}", libc::SIGRTMIN() + 1)
        );
    }
}
