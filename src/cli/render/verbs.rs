//! The operator's commands that hints name: a sprite's own (`zodex sprite github …`) or a
//! fleet's (`zodex fleet …`), chosen once by the command being run, so a hint printed under
//! `zodex fleet` is a command that works on a fleet (each is tested by running it).

use std::sync::OnceLock;

/// Where the operator's commands live for what is being shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbs {
    /// A sprite's own publisher: `zodex sprite github VERB`, `zodex sprite policy VERB`.
    Sprite,
    /// A fleet's service: `zodex fleet VERB`, `zodex fleet policy VERB`.
    Fleet,
}

static CHOSEN: OnceLock<Verbs> = OnceLock::new();

impl Verbs {
    /// Sets the commands hints name for this run (the first choice holds).
    pub fn choose(verbs: Verbs) {
        let _ = CHOSEN.set(verbs);
    }

    /// The commands chosen for this run; a sprite's unless a fleet command chose otherwise.
    pub fn current() -> Verbs {
        CHOSEN.get().copied().unwrap_or(Verbs::Sprite)
    }

    /// `zodex sprite github VERB` or `zodex fleet VERB`.
    pub fn github(self, verb: &str) -> String {
        match self {
            Verbs::Sprite => format!("zodex sprite github {verb}"),
            Verbs::Fleet => format!("zodex fleet {verb}"),
        }
    }

    /// `zodex sprite policy VERB` or `zodex fleet policy VERB`.
    pub fn policy(self, verb: &str) -> String {
        match self {
            Verbs::Sprite => format!("zodex sprite policy {verb}"),
            Verbs::Fleet => format!("zodex fleet policy {verb}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_names_its_own_commands() {
        assert_eq!(
            Verbs::Sprite.github("requests"),
            "zodex sprite github requests"
        );
        assert_eq!(Verbs::Fleet.github("requests"), "zodex fleet requests");
        assert_eq!(
            Verbs::Fleet.policy("explain --sprite s1"),
            "zodex fleet policy explain --sprite s1"
        );
    }
}
