//! The outcome of a finished command, derived from its raw exit facts,
//! its analysis and (when captured) its final pipeline's statuses. The
//! command's output is never touched; the outcome travels beside it.

use super::{Analysis, Class, Stage};

/// How the shell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Exit status of a stage killed by SIGPIPE.
const SIGPIPE_STATUS: i32 = 128 + 13;

/// The derived facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// success, no-match, different, false or failure.
    pub outcome: &'static str,
    /// Statuses of the final pipeline's stages, when the snapshot ran.
    pub pipeline_exit_codes: Option<Vec<i32>>,
    /// One-based stages that genuinely failed (classified pipelines only).
    pub pipeline_failed_stages: Vec<usize>,
    /// `classified`, `unavailable`, or `None` when no snapshot ran.
    pub pipeline_classification: Option<&'static str>,
    /// A short line naming the failed stages.
    pub note: Option<String>,
}

fn stage_ok(stages: &[Stage], codes: &[i32], i: usize) -> bool {
    let code = codes[i];
    code == 0
        || (code == 1 && !stages[i].compound && stages[i].expect.outcome().is_some())
        || (code == SIGPIPE_STATUS && i + 1 < codes.len() && codes[i + 1..].contains(&0))
}

/// Derive the outcome of a command analysed as ANALYSIS that ended with
/// EXIT, with PIPESTATUS from the snapshot when it ran.
pub fn outcome(analysis: &Analysis, exit: Exit, pipestatus: Option<&[i32]>) -> Outcome {
    let mut result = Outcome {
        outcome: "failure",
        pipeline_exit_codes: pipestatus.map(<[i32]>::to_vec),
        pipeline_failed_stages: Vec::new(),
        pipeline_classification: pipestatus.map(|_| "unavailable"),
        note: None,
    };
    if let (Some(codes), Some(stages), Exit::Code(_)) = (pipestatus, &analysis.final_pipeline, exit)
        && analysis.classifiable()
        && codes.len() == stages.len()
    {
        result.pipeline_classification = Some("classified");
        result.pipeline_failed_stages = (0..codes.len())
            .filter(|&i| !stage_ok(stages, codes, i))
            .map(|i| i + 1)
            .collect();
        if result.pipeline_failed_stages.is_empty() {
            let last = codes.len() - 1;
            result.outcome = match codes[last] {
                0 => "success",
                _ => stages[last].expect.outcome().unwrap_or("failure"),
            };
        } else {
            let parts: Vec<String> = result
                .pipeline_failed_stages
                .iter()
                .map(|&n| format!("{n} ({}) exited {}", stages[n - 1].label, codes[n - 1]))
                .collect();
            result.note = Some(format!("failed pipeline stage: {}", parts.join(", ")));
        }
        return result;
    }
    result.outcome = match exit {
        Exit::Code(0) => "success",
        Exit::Code(1) if analysis.class <= Class::Mutating => analysis
            .single
            .as_ref()
            .and_then(|s| s.expect.outcome())
            .unwrap_or("failure"),
        _ => "failure",
    };
    result
}
