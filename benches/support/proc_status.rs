//! A figure of a running process from `/proc/PID/status`, in KiB.

/// `field` (e.g. `"VmHWM:"`, the peak resident set) of process `pid`; 0 when it is gone.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
