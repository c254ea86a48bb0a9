//! Delivery of execution results that nobody was waiting for: EXECUTION
//! records for yielded Bash commands, MONITOR and MONITOR_TERMINAL
//! records for monitors, each in the owner's durable mailbox, plus the
//! events that tell Lisp (and through it the idle-wake logic) about them.

use std::path::Path;

use super::execution::{Exec, StopBy, Termination};
use super::monitor::{self, Line};
use crate::datum::Datum;
use crate::events::{self, Event};
use crate::store::{NewMessage, Store};

/// What a terminal delivery did.
#[derive(Debug, Default)]
pub struct Delivery {
    pub ids: Vec<i64>,
    pub mailbox: Option<String>,
    pub wake: bool,
    pub error: Option<String>,
}

fn is_root(owner: &str) -> bool {
    owner == "/root"
}

fn push(db: &Path, records: &[NewMessage], delivery: &mut Delivery) {
    match Store::shared(db).and_then(|store| store.mailbox_post_all(records)) {
        Ok(ids) => {
            delivery.ids.extend(ids);
            delivery.mailbox = Some(db.to_string_lossy().into_owned());
        }
        Err(e) => delivery.error = Some(e.message),
    }
}

/// Publish a yielded Bash execution's terminal OBSERVATION text to the
/// owner's mailbox as one EXECUTION record.
pub fn execution_record(exec: &Exec, text: &str) -> Delivery {
    let mut delivery = Delivery::default();
    let Some(db) = exec.spec.mailbox.as_deref() else {
        return delivery;
    };
    let (termination, outcome, exit_code, note) = {
        let st = exec.state();
        let Some(f) = st.facts.as_ref() else {
            return delivery;
        };
        (
            f.termination,
            f.outcome,
            f.exit_code_attr(),
            f.pipeline.as_ref().and_then(|p| p.note.clone()),
        )
    };
    let mut body = text.to_string();
    if let Some(note) = note {
        if !body.is_empty() && !body.ends_with('\n') {
            body.push('\n');
        }
        body.push_str(&note);
    }
    let record = NewMessage {
        recipient: exec.spec.owner.clone(),
        sender: Some(exec.id.clone()),
        kind: "EXECUTION".into(),
        attrs: vec![
            ("execution_id".into(), exec.id.clone()),
            (
                "description".into(),
                exec.spec.description.clone().unwrap_or_default(),
            ),
            ("command".into(), exec.spec.command.clone()),
            ("termination".into(), termination.name().into()),
            ("outcome".into(), outcome.into()),
            ("exit_code".into(), exit_code),
        ],
        payload: body,
    };
    push(db, &[record], &mut delivery);
    let by = exec.state().stop.map(|(_, by)| by);
    delivery.wake = delivery.error.is_none()
        && is_root(&exec.spec.owner)
        && termination.wakes()
        && !matches!(by, Some(StopBy::Model | StopBy::User));
    delivery
}

fn line_records(exec: &Exec, lines: &[Line], omitted: usize) -> Vec<NewMessage> {
    let description = exec.spec.description.clone().unwrap_or_default();
    let last = lines.len().saturating_sub(1);
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let mut attrs = vec![
                ("execution_id".into(), exec.id.clone()),
                ("description".into(), description.clone()),
            ];
            let mut body = line.render();
            if i == last && omitted > 0 {
                attrs.push(("omitted".into(), omitted.to_string()));
                body.push_str(&format!("\n[{omitted} more lines omitted from this batch]"));
            }
            NewMessage {
                recipient: exec.spec.owner.clone(),
                sender: Some(exec.id.clone()),
                kind: "MONITOR".into(),
                attrs,
                payload: body,
            }
        })
        .collect()
}

/// Publish PENDING monitor lines as one batch: an event plus one
/// MONITOR record per line; lines beyond the batch size are counted as
/// omitted. Returns true when the monitor's unread mailbox bytes passed
/// the flood limit.
pub fn publish_monitor_batch(exec: &Exec, pending: &mut Vec<Line>) -> bool {
    let batch = monitor::batch(pending);
    publish_batch(exec, &batch.lines, batch.omitted)
}

fn publish_batch(exec: &Exec, lines: &[Line], omitted: usize) -> bool {
    if lines.is_empty() || exec.state().retired {
        return false;
    }
    let mut delivery = Delivery::default();
    let mut flooded = false;
    if let Some(db) = exec.spec.mailbox.as_deref() {
        push(db, &line_records(exec, lines, omitted), &mut delivery);
        flooded = Store::shared(db)
            .and_then(|store| store.mailbox_undelivered_bytes(&exec.id))
            .is_ok_and(|n| n > monitor::FLOOD_UNREAD_BYTES);
    }
    exec.state().events += lines.len();
    let data = Datum::plist([
        ("session", Datum::str(&exec.spec.session)),
        ("id", Datum::str(&exec.id)),
        ("owner", Datum::str(&exec.spec.owner)),
        ("tool-use-id", Datum::opt_str(exec.spec.tool_use_id.clone())),
        ("description", Datum::opt_str(exec.spec.description.clone())),
        (
            "monitor-lines",
            Datum::List(lines.iter().map(|l| Datum::Str(l.render())).collect()),
        ),
        ("monitor-omitted", Datum::Int(omitted as i64)),
        (
            "mailbox-ids",
            Datum::List(delivery.ids.iter().map(|&i| Datum::Int(i)).collect()),
        ),
        (
            "wake",
            Datum::bool(is_root(&exec.spec.owner) && delivery.error.is_none()),
        ),
        ("error", Datum::opt_str(delivery.error)),
    ]);
    events::global().push(Event::new("exec-monitor", data));
    flooded
}

/// The one MONITOR_TERMINAL record of a settled monitor. FOLDED lines
/// (pending when the model or user stopped it) go into its body.
pub fn monitor_terminal(exec: &Exec, folded: &[Line], observed: bool) -> Delivery {
    let mut delivery = Delivery::default();
    let (termination, outcome, exit_code, events, by) = {
        let st = exec.state();
        let Some(f) = st.facts.as_ref() else {
            return delivery;
        };
        (
            f.termination,
            f.outcome,
            f.exit_code_attr(),
            st.events,
            st.stop.map(|(_, by)| by),
        )
    };
    if termination == Termination::Teardown || exec.state().retired {
        return delivery;
    }
    let description = exec.spec.description.clone().unwrap_or_default();
    let mut body = match termination {
        Termination::Exit | Termination::Signal => format!(
            "Monitor \"{description}\" ended on its own ({}).",
            if exit_code.is_empty() {
                "no exit code".to_string()
            } else {
                format!("exit code {exit_code}")
            }
        ),
        Termination::Timeout => format!(
            "Monitor \"{description}\" reached its timeout and was stopped; start it again explicitly if it is still needed."
        ),
        Termination::Flood => format!(
            "Monitor \"{description}\" was stopped because it produced too many events; restart it with a tighter filter."
        ),
        _ => format!("Monitor \"{description}\" was stopped."),
    };
    if !folded.is_empty() {
        body.push_str("\nLast lines:\n");
        for line in folded {
            body.push_str(&line.render());
            body.push('\n');
        }
    }
    let record = NewMessage {
        recipient: exec.spec.owner.clone(),
        sender: Some(exec.id.clone()),
        kind: "MONITOR_TERMINAL".into(),
        attrs: vec![
            ("execution_id".into(), exec.id.clone()),
            ("description".into(), description),
            ("event_count".into(), events.to_string()),
            ("termination".into(), termination.name().into()),
            ("outcome".into(), outcome.into()),
            ("exit_code".into(), exit_code),
        ],
        payload: body,
    };
    if let Some(db) = exec.spec.mailbox.as_deref() {
        push(db, &[record], &mut delivery);
    }
    delivery.wake = delivery.error.is_none()
        && !observed
        && is_root(&exec.spec.owner)
        && termination.wakes()
        && !matches!(by, Some(StopBy::Model | StopBy::User));
    delivery
}
