//! The engine the benches decide with: the built-in policies, and every `demo/*` repository a
//! target whose default branch is `main`.

use zodex::engine::Engine;
use zodex::engine::policy::Policies;
use zodex::engine::targets::{TargetSpec, Targets};

pub fn demo_engine() -> Engine {
    let targets = Targets::from_specs(&[TargetSpec {
        repo: None,
        owner: Some("demo".into()),
        default_branch: Some("main".into()),
    }])
    .unwrap();
    Engine::new(Policies::builtin().unwrap(), targets)
}
