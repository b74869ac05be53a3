//! Real Unix users for the attack suite: an agent user, a publisher user and the group they
//! share, created with `useradd`/`groupadd --system` under unique names (`zxa-…`, `zxp-…`,
//! `zxg-…`) and always removed again (the guard's `Drop` runs on panic too).
//!
//! Only root can do this: the tests that need it are `#[ignore = "needs root"]` and start with
//! [`require_root`]; `scripts/test` runs them as root (`--include-ignored`).
//!
//! [`run_as`] makes a `Command` start as one of these users: supplementary groups, gid and uid
//! are set in that order in the child, before `exec`.
#![allow(unsafe_code)] // the user switch before exec (pre_exec); each block says why it is sound

use super::wait::poll;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// `useradd`/`userdel` lock `/etc/passwd`; one at a time within this process.
static ACCOUNTS: Mutex<()> = Mutex::new(());

/// One system user.
#[derive(Debug, Clone)]
pub struct SystemUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// The agent, the publisher and the shared group; removed when dropped.
#[derive(Debug)]
pub struct Users {
    pub agent: SystemUser,
    pub publisher: SystemUser,
    /// The sprite's group: the agent's primary group, so the socket directory can admit it.
    pub group: String,
    pub gid: u32,
    created: Vec<Account>,
}

#[derive(Debug)]
enum Account {
    User(String),
    Group(String),
}

/// True when this process may create users (and act as them).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The first line of every test that needs root (each is `#[ignore = "needs root"]`, run by
/// `scripts/test` as root with `--include-ignored`): run without root, it fails saying so — it
/// never passes by skipping.
pub fn require_root() {
    assert!(
        is_root(),
        "this test needs root (it creates users or acts as another uid): run it as root, as \
         scripts/test does in CI"
    );
}

fn suffix() -> String {
    let mut raw = [0u8; 4];
    getrandom::fill(&mut raw).unwrap();
    hex::encode(raw)
}

/// Runs an account tool, retrying while another process holds the account lock (exit 10).
fn account_tool(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut last = String::new();
    let done = poll(Duration::from_secs(5), || {
        let out = match Command::new(program).args(args).output() {
            Ok(out) => out,
            Err(e) => return Some(Err(format!("{program}: {e}"))),
        };
        if out.status.success() {
            return Some(Ok(()));
        }
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let locked = out.status.code() == Some(10) || stderr.contains("lock");
        last = format!("{program} {args:?}: {} {stderr}", out.status);
        (!locked).then(|| Err(last.clone()))
    });
    done.unwrap_or(Err(last)).map_err(anyhow::Error::msg)
}

fn lookup(name: &str) -> SystemUser {
    let user = nix::unistd::User::from_name(name)
        .unwrap()
        .unwrap_or_else(|| panic!("user {name} was created but cannot be found"));
    SystemUser {
        name: name.to_string(),
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
    }
}

impl Users {
    /// Creates the three accounts; `None` when not root.
    pub fn create() -> Option<Self> {
        if !is_root() {
            return None;
        }
        let _lock = ACCOUNTS.lock().unwrap_or_else(|p| p.into_inner());
        let id = suffix();
        let group = format!("zxg-{id}");
        let agent = format!("zxa-{id}");
        let publisher = format!("zxp-{id}");
        let mut users = Users {
            agent: SystemUser {
                name: String::new(),
                uid: 0,
                gid: 0,
            },
            publisher: SystemUser {
                name: String::new(),
                uid: 0,
                gid: 0,
            },
            group: group.clone(),
            gid: 0,
            created: Vec::new(),
        };
        // Each account joins `created` as soon as it exists, so a failure half-way still
        // removes what was made.
        account_tool("groupadd", &["--system", &group]).unwrap();
        users.created.push(Account::Group(group.clone()));
        let nologin = ["--no-create-home", "--shell", "/usr/sbin/nologin"];
        let mut args = vec!["--system", "--no-user-group", "--gid", group.as_str()];
        args.extend(nologin);
        args.push(&agent);
        account_tool("useradd", &args).unwrap();
        users.created.push(Account::User(agent.clone()));
        // The publisher gets its own group (useradd names it after the user).
        let mut args = vec!["--system", "--user-group"];
        args.extend(nologin);
        args.push(&publisher);
        account_tool("useradd", &args).unwrap();
        users.created.push(Account::User(publisher.clone()));
        users.created.push(Account::Group(publisher.clone()));
        users.agent = lookup(&agent);
        users.publisher = lookup(&publisher);
        users.gid = nix::unistd::Group::from_name(&group)
            .unwrap()
            .expect("the group was created")
            .gid
            .as_raw();
        Some(users)
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        let _lock = ACCOUNTS.lock().unwrap_or_else(|p| p.into_inner());
        // Users first (a group cannot go while it is someone's primary group).
        for account in self.created.iter().rev() {
            if let Account::User(name) = account
                && account_tool("userdel", &[name]).is_err()
            {
                let _ = account_tool("userdel", &["--force", name]);
            }
        }
        for account in self.created.iter().rev() {
            if let Account::Group(name) = account
                && nix::unistd::Group::from_name(name).ok().flatten().is_some()
            {
                let _ = account_tool("groupdel", &[name]);
            }
        }
    }
}

/// Makes `command` start as `user` with exactly `groups` as supplementary groups.
pub fn run_as<'c>(command: &'c mut Command, user: &SystemUser, groups: &[u32]) -> &'c mut Command {
    let uid = nix::unistd::Uid::from_raw(user.uid);
    let gid = nix::unistd::Gid::from_raw(user.gid);
    let groups: Vec<nix::unistd::Gid> = groups
        .iter()
        .map(|g| nix::unistd::Gid::from_raw(*g))
        .collect();
    // SAFETY: between fork and exec the closure only makes three system calls (no allocation:
    // `groups` was built before the fork), which is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setgroups(&groups).map_err(std::io::Error::from)?;
            nix::unistd::setgid(gid).map_err(std::io::Error::from)?;
            nix::unistd::setuid(uid).map_err(std::io::Error::from)?;
            Ok(())
        })
    }
}
