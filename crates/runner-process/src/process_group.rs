//! The only places where this crate calls the kernel without a safe wrapper: signalling a whole
//! process group, and arming the parent-death signal in a freshly forked child.

use std::io;

use tokio::process::Command;

/// Sends `signal` to every process in the group `process_group_id`.
///
/// A group that no longer exists is reported as `ESRCH`; callers decide whether that matters.
#[allow(unsafe_code)]
pub(crate) fn signal_process_group(
    process_group_id: libc::pid_t,
    signal: libc::c_int,
) -> io::Result<()> {
    // `killpg(0)` would signal the gateway's own group, and group 1 is init's: neither can be a
    // group this crate created, so refuse them rather than trust the caller.
    if process_group_id <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {process_group_id}"),
        ));
    }
    // SAFETY: `killpg` takes two integers and reads or writes no memory of this process, so the
    // call cannot break memory safety. Which processes it reaches is the caller's concern:
    // callers only pass the id of a group whose leader they spawned and have not yet reaped,
    // so the id cannot have been reused by another group.
    let result = unsafe { libc::killpg(process_group_id, signal) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the child receive SIGKILL when the thread that spawned it goes away, so that a gateway
/// killed with SIGKILL (which runs no cleanup) does not leave its servers running.
///
/// The kernel ties the parent-death signal to the spawning *thread*, not the process, which is
/// why children are spawned from one thread that lives as long as the process
/// (see `spawner_thread`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn kill_child_when_gateway_dies(command: &mut Command) {
    let gateway_pid = std::process::id();
    // SAFETY: the hook runs in the forked child before `exec`, where only async-signal-safe
    // operations are sound because another thread of the gateway may have held a lock (the
    // allocator's, say) at the moment of the fork. The hook only makes two system calls
    // (`prctl` and `getppid`) and builds its errors from raw errno values, which neither
    // allocates nor takes a lock. It captures a plain integer and touches no shared state.
    unsafe {
        command.pre_exec(move || {
            // `prctl` is variadic and the kernel reads every argument as an unsigned long.
            let signal = libc::SIGKILL as libc::c_ulong;
            let unused: libc::c_ulong = 0;
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal, unused, unused, unused) == -1 {
                return Err(io::Error::last_os_error());
            }
            // The gateway may have died between the fork and the `prctl`, in which case the
            // signal will never come: give up instead of running unsupervised.
            if std::os::unix::process::parent_id() != gateway_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn kill_child_when_gateway_dies(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_own_group_and_inits_group_are_never_signalled() {
        // A signal 0 only checks permissions, so nothing is harmed if the guard were missing;
        // the guard must reject the call before it reaches the kernel.
        for reserved in [-5, 0, 1] {
            let error = signal_process_group(reserved, 0).unwrap_err();
            assert_eq!(
                error.kind(),
                io::ErrorKind::InvalidInput,
                "group {reserved}"
            );
        }
    }
}
