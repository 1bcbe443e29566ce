//! `stats --check`: the rules a checkpoint must pass before it is published. A tensor fails
//! when it holds NaN, when it holds an infinity, or when it is a float tensor of more than one
//! element whose values are all zero (unless a pattern exempts it: fresh biases, LoRA B
//! matrices are zero by design).

use crate::ops::name_glob::{any_matches, Glob};
use crate::ops::stats::{StatsReport, Values};

/// One failed rule of one tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The failing tensor's name.
    pub tensor: String,
    /// `nan`, `inf` or `all_zero`.
    pub rule: &'static str,
    /// What was found, for people: "3 NaN of 1,024 values".
    pub detail: String,
}

/// Every problem of `report`, tensor by tensor in its order; `allow_zero` exempts tensors
/// from the all-zero rule.
pub fn check(report: &StatsReport, allow_zero: &[Glob]) -> Vec<Problem> {
    let mut out = Vec::new();
    for t in &report.tensors {
        let Values::Float { acc, .. } = &t.values else {
            continue;
        };
        let mut push = |rule, detail| {
            out.push(Problem {
                tensor: t.name.clone(),
                rule,
                detail,
            })
        };
        if acc.nan > 0 {
            push("nan", format!("{} NaN of {} values", acc.nan, acc.elements));
        }
        if acc.pos_inf + acc.neg_inf > 0 {
            push(
                "inf",
                format!(
                    "{} +Inf and {} -Inf of {} values",
                    acc.pos_inf, acc.neg_inf, acc.elements
                ),
            );
        }
        if t.elements > 1 && acc.zeros == acc.elements && !any_matches(allow_zero, &t.name) {
            push("all_zero", format!("all {} values are zero", acc.elements));
        }
    }
    out
}
