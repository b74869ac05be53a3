//! The machine-readable line every headline benchmark prints, collected by
//! `scripts/bench-report`: `BENCH {"name":…,"value":…,"baseline":…,"ratio":…,"target":…,"met":…}`.
//!
//! `value` and `baseline` are in `unit` (both measured side by side in the same run); `ratio` is
//! value / baseline; `target` is the ceiling the issue sets on the ratio (or, with
//! `target_kind = "value"`, on the value itself); `met` says whether every limit given holds.

#![allow(dead_code)]

/// One figure and the limits it is held to.
pub struct BenchLine<'a> {
    pub name: &'a str,
    pub unit: &'a str,
    pub value: f64,
    /// The side-by-side baseline, when there is one.
    pub baseline: Option<f64>,
    /// The ceiling on value / baseline.
    pub max_ratio: Option<f64>,
    /// The ceiling on the value itself (same unit).
    pub max_value: Option<f64>,
    /// A ceiling on value - baseline (same unit).
    pub max_added: Option<f64>,
}

impl BenchLine<'_> {
    /// Prints the line and returns whether every limit is met.
    pub fn print(&self) -> bool {
        self.print_with(&[])
    }

    /// [`BenchLine::print`] with more figures about the same measurement as fields of their
    /// own (the far-GitHub benches add `rtt_ms` and `added_round_trips`).
    pub fn print_with(&self, extra: &[(&str, f64)]) -> bool {
        let ratio = self.baseline.filter(|b| *b > 0.0).map(|b| self.value / b);
        let mut met = true;
        if let (Some(max), Some(r)) = (self.max_ratio, ratio) {
            met &= r <= max;
        }
        if let Some(max) = self.max_value {
            met &= self.value <= max;
        }
        if let (Some(max), Some(b)) = (self.max_added, self.baseline) {
            met &= self.value - b <= max;
        }
        let num = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.4}"));
        let has_target =
            self.max_ratio.is_some() || self.max_value.is_some() || self.max_added.is_some();
        let extra: String = extra
            .iter()
            .map(|(name, value)| format!(",{name:?}:{value:.4}"))
            .collect();
        println!(
            "BENCH {{\"name\":{:?},\"unit\":{:?},\"value\":{:.4},\"baseline\":{},\"ratio\":{},\"target_ratio\":{},\"target_value\":{},\"target_added\":{},\"met\":{}{extra}}}",
            self.name,
            self.unit,
            self.value,
            num(self.baseline),
            num(ratio),
            num(self.max_ratio),
            num(self.max_value),
            num(self.max_added),
            if has_target {
                met.to_string()
            } else {
                "null".to_string()
            },
        );
        met
    }
}
