//! The CPU a local fleet spends over a stretch of work, by side (the kernel's accounting: user
//! and system time): this process (the load bench's simulated sprites), the replicas, and
//! PostgreSQL (its postmaster with its backends). On a shared machine these say what a figure
//! cost where wall time only says how long it took.

use crate::cpu;
use crate::support::fleet::DevFleet;

/// The processes of a `zodex dev fleet up` fleet whose CPU is counted.
pub struct FleetPids {
    replicas: Vec<u32>,
    /// `None` when the cluster is not where `zodex dev fleet up` puts it for this user.
    postmaster: Option<u32>,
}

impl FleetPids {
    pub fn of(fleet: &DevFleet) -> FleetPids {
        let replicas = fleet.info["replicas"].as_array().unwrap();
        // postmaster.pid's first line is the server's pid.
        let postmaster = std::fs::read_to_string(fleet.dir.join("postgres/data/postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next()?.trim().parse().ok());
        FleetPids {
            replicas: replicas
                .iter()
                .map(|r| r["pid"].as_u64().unwrap() as u32)
                .collect(),
            postmaster,
        }
    }
}

/// CPU seconds by side, since the start of the process or between two samples.
pub struct CpuSpent {
    pub sprites: f64,
    pub replicas: f64,
    /// NaN when PostgreSQL's server was not found.
    pub postgres: f64,
}

impl CpuSpent {
    pub fn now(pids: &FleetPids) -> CpuSpent {
        CpuSpent {
            sprites: cpu::process_and_children(std::process::id()),
            replicas: pids
                .replicas
                .iter()
                .map(|p| cpu::process_and_children(*p))
                .sum(),
            postgres: pids.postmaster.map_or(f64::NAN, cpu::process_tree),
        }
    }

    /// What was spent from `before` to this sample.
    pub fn since(&self, before: &CpuSpent) -> CpuSpent {
        CpuSpent {
            sprites: self.sprites - before.sprites,
            replicas: self.replicas - before.replicas,
            postgres: self.postgres - before.postgres,
        }
    }
}
