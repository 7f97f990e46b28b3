//! The `process_*` metrics every Prometheus client library exports (the
//! Go and Python clients' process collectors: same names, units and
//! sources), read from `/proc/self` on Linux; elsewhere none.

use super::exposition::{Family, Kind};

/// What `/proc/self` says of this process now.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident set size, bytes.
    pub resident_bytes: u64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: u64,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors (`None`: unlimited).
    pub max_fds: Option<u64>,
}

impl ProcessStats {
    /// Reads `/proc/self/stat`, `/proc/stat` (boot time) and
    /// `/proc/self/fd`; `None` where there is no such file (not Linux) or
    /// it cannot be parsed.
    pub fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        let mut s = parse(
            &stat,
            &boot,
            rustix::param::clock_ticks_per_second(),
            rustix::param::page_size() as u64,
        )?;
        s.open_fds = open_fds;
        s.max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        Some(s)
    }

    /// Writes the families of `self` into `out`.
    pub fn render(&self, out: &mut String) {
        let families: [(&str, Kind, &str, f64); 5] = [
            (
                "process_cpu_seconds_total",
                Kind::Counter,
                "Total user and system CPU time spent in seconds.",
                self.cpu_seconds,
            ),
            (
                "process_resident_memory_bytes",
                Kind::Gauge,
                "Resident memory size in bytes.",
                self.resident_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                Kind::Gauge,
                "Virtual memory size in bytes.",
                self.virtual_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                Kind::Gauge,
                "Start time of the process since unix epoch in seconds.",
                self.start_time_seconds,
            ),
            (
                "process_open_fds",
                Kind::Gauge,
                "Number of open file descriptors.",
                self.open_fds as f64,
            ),
        ];
        for (name, kind, help, value) in families {
            Family::new(out, name, kind, help).sample(&[], value);
        }
        Family::new(
            out,
            "process_max_fds",
            Kind::Gauge,
            "Maximum number of open file descriptors.",
        )
        .sample(&[], self.max_fds.map_or(f64::INFINITY, |n| n as f64));
    }
}

/// Parses `/proc/self/stat` (`stat`) and `/proc/stat` (`boot`, for
/// `btime`) with `ticks` clock ticks a second and pages of `page` bytes;
/// `open_fds` and `max_fds` are left 0 and `None`.
fn parse(stat: &str, boot: &str, ticks: u64, page: u64) -> Option<ProcessStats> {
    // The command name (field 2) is in parentheses and may hold spaces
    // or parentheses itself: fields 3 on follow the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n.checked_sub(3)?)?.parse().ok() };
    let (utime, stime, start, vsize, rss) =
        (field(14)?, field(15)?, field(22)?, field(23)?, field(24)?);
    let btime: u64 = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // One correctly rounded division, as the Go client computes it: 380
    // ticks at 100 a second are 3.8, not 3.8000000000000003.
    let seconds = |t: u64| t as f64 / ticks.max(1) as f64;
    Some(ProcessStats {
        cpu_seconds: seconds(utime + stime),
        resident_bytes: rss * page,
        virtual_bytes: vsize,
        start_time_seconds: btime as f64 + seconds(start),
        open_fds: 0,
        max_fds: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `stat` line from proc(5)'s layout, with a command name holding a
    /// space and a parenthesis.
    #[test]
    fn stat_fields_are_read_from_after_the_command_name() {
        let stat = "4242 (lamina (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 130 0 0 20 0 9 0 12345 987654321 4096 18446744073709551615 \
                    1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
        let s = parse(stat, boot, 100, 4096).unwrap();
        assert_eq!(s.cpu_seconds, 3.8);
        assert_eq!(s.resident_bytes, 4096 * 4096);
        assert_eq!(s.virtual_bytes, 987_654_321);
        assert!((s.start_time_seconds - 1_700_000_123.45).abs() < 1e-6);
        assert!(parse("garbage", boot, 100, 4096).is_none());
        assert!(parse(stat, "cpu 1\n", 100, 4096).is_none());
    }

    /// This test process, read for real: started before now, a few
    /// descriptors open, some memory resident.
    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_sensibly() {
        let s = ProcessStats::read().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(s.start_time_seconds > now - 86_400.0 * 365.0 && s.start_time_seconds <= now + 1.0);
        assert!(s.open_fds >= 3, "{s:?}");
        assert!(s.resident_bytes > 1 << 20, "{s:?}");
        assert!(s.virtual_bytes >= s.resident_bytes, "{s:?}");
        assert!(s.max_fds.is_none_or(|m| m >= s.open_fds), "{s:?}");
    }
}
