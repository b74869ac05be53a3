//! CPU seconds (user + system) from the kernel's own accounting: the machine-noise-free figure
//! of what a piece of work costs, whatever else the machine is doing.

#![allow(unsafe_code)] // sysconf and getrusage: each block says why it is sound
#![allow(dead_code)] // each bench uses a part

/// Clock ticks per second of `/proc/PID/stat` (`sysconf(_SC_CLK_TCK)`).
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// CPU seconds of process `pid` and of the children it has waited for (utime, stime, cutime,
/// cstime of `/proc/PID/stat`): for `zodex-prd`, the daemon with its indexing children and git.
pub fn process_and_children(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces and parentheses: fields count from the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    // After ')': state is field 3 of the man page, so utime (14) … cstime (17) are 11..=14.
    let ticks: u64 = (11..=14)
        .filter_map(|i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    ticks as f64 / ticks_per_second()
}

/// CPU seconds of this process's children that have been waited for (`RUSAGE_CHILDREN`): the
/// git processes a bench runs, and devhub's receiving git (devhub runs in the bench process).
pub fn waited_children() -> f64 {
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only into the struct it is given, which lives for the call.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// [`process_and_children`] of `pid` and of each of its children still running (a server
/// whose workers live for a connection, as PostgreSQL's backends do: those that ended are in
/// `pid`'s own waited-for children).
pub fn process_tree(pid: u32) -> f64 {
    let children = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| parent_of(*child) == Some(pid));
    process_and_children(pid) + children.map(process_and_children).sum::<f64>()
}

/// The parent of process `pid` (`/proc/PID/stat`'s ppid), when it is still there.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}
