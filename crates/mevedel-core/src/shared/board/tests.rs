use std::collections::{HashMap, VecDeque};

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

fn ops(v: Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

fn done(outcome: Outcome) -> Change {
    match outcome {
        Outcome::Done(change) => change,
        Outcome::Conflicts(c) => panic!("unexpected conflicts {c:?}"),
    }
}

fn board_with(ids: &[&str]) -> State {
    let mut s = State::new(7);
    let adds: Vec<Value> = ids
        .iter()
        .map(|id| json!({"op": "add", "element": {"type": "rectangle", "id": id, "x": 0}}))
        .collect();
    done(s.edit(&adds, "model", 1).expect("adds"));
    s
}

fn hash_of(s: &State, id: &str) -> String {
    element::hash(s.get(id).expect("element"))
}

#[test]
fn a_stale_hash_is_a_conflict_and_changes_nothing() {
    let mut s = board_with(&["a", "b"]);
    let old = hash_of(&s, "a");
    done(
        s.edit(
            &ops(json!([{"op": "update", "hash": old, "set": {"x": 5}}])),
            "model",
            2,
        )
        .expect("edit"),
    );
    let before = s.scene(false);
    let stale = json!([
        {"op": "update", "hash": hash_of(&s, "b"), "set": {"x": 1}},
        {"op": "update", "hash": old, "id": "a", "set": {"x": 9}}
    ]);
    match s.edit(&ops(stale), "model", 3).expect("edit") {
        Outcome::Conflicts(c) => {
            assert_eq!(c.len(), 1);
            assert_eq!(c[0].hash, old);
            assert_eq!(c[0].element.as_deref(), Some("a"));
        }
        Outcome::Done(_) => panic!("a stale hash was applied"),
    }
    assert_eq!(s.scene(false), before);
    // Named by its hash alone, the element is still found.
    let alone = json!([{"op": "delete", "hash": old}]);
    match s.edit(&ops(alone), "model", 4).expect("edit") {
        Outcome::Conflicts(c) => assert_eq!(c[0].element.as_deref(), Some("a")),
        Outcome::Done(_) => panic!("a stale hash was applied"),
    }
}

#[test]
fn an_invalid_op_undoes_the_ones_before_it() {
    let mut s = board_with(&["a"]);
    let before = s.scene(false);
    let bad = json!([
        {"op": "update", "hash": hash_of(&s, "a"), "set": {"x": 5}},
        {"op": "update", "hash": hash_of(&s, "a"), "set": {"version": 99}}
    ]);
    let err = s.edit(&ops(bad), "model", 2).expect_err("refused");
    assert!(err.message.contains("operation 1"), "{}", err.message);
    assert_eq!(s.scene(false), before);
    let bad = json!([
        {"op": "add", "element": {"type": "text", "id": "n", "containerId": "a", "text": "x"}},
        {"op": "set-background", "color": "#000000"},
        {"op": "add-image", "key": "img", "mime": "image/png", "data": "AAAA"},
        {"op": "update", "hash": hash_of(&s, "a"), "set": {"x": 1}},
        {"op": "add", "element": {"type": "text", "id": "n"}}
    ]);
    let err = s.edit(&ops(bad), "model", 3).expect_err("refused");
    assert!(err.message.contains("operation 4"), "{}", err.message);
    assert_eq!(s.scene(false), before);
    assert!(s.get("n").is_none());
    assert_eq!(s.hash("a"), element::hash(s.get("a").expect("a")));
}

#[test]
fn hashes_survive_save_and_restore() {
    let mut s = board_with(&["a", "b"]);
    done(s.edit(&ops(json!([{"op": "add", "element": {"type": "text", "id": "t", "text": "hi", "containerId": "a"}}])), "model", 2).expect("edit"));
    let saved = serde_json::to_string(&s.scene(false)).expect("json");
    let back = State::from_scene(&saved, 9).expect("scene");
    for id in ["a", "b", "t"] {
        assert_eq!(hash_of(&s, id), hash_of(&back, id));
    }
    assert_eq!(back.history, s.history);
    let exported = s.scene(true);
    assert!(exported.get("mevedel").is_none());
}

#[test]
fn a_model_edit_bumps_the_version_so_pages_take_it() {
    let mut s = board_with(&["a"]);
    let v = element::version(s.get("a").expect("a"));
    done(
        s.edit(
            &ops(json!([{"op": "update", "hash": hash_of(&s, "a"), "set": {"x": 3}}])),
            "model",
            2,
        )
        .expect("edit"),
    );
    assert_eq!(element::version(s.get("a").expect("a")), v + 1);
}

#[test]
fn deleting_a_container_deletes_its_text() {
    let mut s = board_with(&["a"]);
    done(s.edit(&ops(json!([{"op": "add", "element": {"type": "text", "id": "t", "text": "x", "containerId": "a"}}])), "model", 2).expect("edit"));
    let change = done(
        s.edit(
            &ops(json!([{"op": "delete", "hash": hash_of(&s, "a")}])),
            "model",
            3,
        )
        .expect("edit"),
    );
    assert_eq!(change.deleted, vec!["a".to_string(), "t".to_string()]);
    assert_eq!(s.live().count(), 0);
}

#[test]
fn insert_gives_fresh_ids_and_keeps_references() {
    let mut s = State::new(3);
    let item = json!([
        {"type": "rectangle", "id": "r", "x": 10, "y": 10, "groupIds": ["g"], "boundElements": [{"type": "text", "id": "t"}]},
        {"type": "text", "id": "t", "x": 20, "y": 30, "containerId": "r", "groupIds": ["g"], "text": "lib"}
    ]);
    let change = done(
        s.edit(
            &ops(json!([{"op": "insert", "elements": item, "x": 100, "y": 200}])),
            "model",
            1,
        )
        .expect("insert"),
    );
    assert_eq!(change.added.len(), 2);
    let r = s.get(&change.added[0]).expect("r");
    let t = s.get(&change.added[1]).expect("t");
    assert_eq!(r["x"], json!(100.0));
    assert_eq!(t["y"], json!(220.0));
    assert_eq!(t["containerId"], json!(change.added[0]));
    assert_eq!(r["boundElements"][0]["id"], json!(change.added[1]));
    assert_eq!(r["groupIds"], t["groupIds"]);
    assert_ne!(r["groupIds"][0], json!("g"));
}

#[test]
fn restore_brings_back_an_earlier_board_above_every_version() {
    let mut s = board_with(&["a", "b"]);
    let earlier = serde_json::to_string(&s.scene(false)).expect("json");
    let ha = hash_of(&s, "a");
    done(
        s.edit(
            &ops(json!([
                {"op": "update", "hash": ha, "set": {"x": 50}},
                {"op": "delete", "hash": hash_of(&s, "b")},
                {"op": "add", "element": {"type": "ellipse", "id": "c"}}
            ])),
            "model",
            2,
        )
        .expect("edit"),
    );
    let versions: HashMap<String, i64> = s
        .all()
        .iter()
        .map(|e| (element::id(e).to_string(), element::version(e)))
        .collect();
    let change = s.restore(&earlier, "rewind", 3).expect("restore");
    assert_eq!(hash_of(&s, "a"), ha);
    assert!(s.get_live("b").is_some());
    assert!(s.get_live("c").is_none());
    assert_eq!(change.deleted, vec!["c".to_string()]);
    for e in s.all() {
        assert!(
            element::version(e) > versions[element::id(e)],
            "{} not bumped",
            element::id(e)
        );
    }
}

#[test]
fn merge_reports_what_the_page_lacks() {
    let mut s = board_with(&["a"]);
    let mut old = s.get("a").cloned().expect("a");
    old.insert("version".into(), json!(0));
    old.insert("x".into(), json!(77));
    let (change, newer) = s.merge(vec![Value::Object(old)]).expect("merge");
    assert!(change.is_empty());
    assert_eq!(newer.len(), 1);
    let err = s
        .merge(vec![json!({"id": "../x", "type": "rectangle"})])
        .expect_err("refused");
    assert!(err.message.contains("not [a-zA-Z0-9_-]"));
}

/// One step of a random interleaving between the board (the model's
/// side) and one page (the user's side).
#[derive(Debug, Clone)]
enum Step {
    ModelEdit(usize, i64),
    UserEdit(usize, i64),
    ModelAdd,
    UserAdd,
    ModelDelete(usize),
    ToPage,
    ToBoard,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..6usize, 0..1000i64).prop_map(|(i, x)| Step::ModelEdit(i, x)),
        3 => (0..6usize, 0..1000i64).prop_map(|(i, x)| Step::UserEdit(i, x)),
        1 => Just(Step::ModelAdd),
        1 => Just(Step::UserAdd),
        1 => (0..6usize).prop_map(Step::ModelDelete),
        3 => Just(Step::ToPage),
        3 => Just(Step::ToBoard),
    ]
}

/// The page's replica, merging by the same rule as Excalidraw's.
fn page_merge(page: &mut HashMap<String, Map<String, Value>>, incoming: Vec<Map<String, Value>>) {
    for el in incoming {
        let id = element::id(&el).to_string();
        match page.get(&id) {
            Some(local) if !element::remote_wins(local, &el) => {}
            _ => {
                page.insert(id, el);
            }
        }
    }
}

fn live_map(page: &HashMap<String, Map<String, Value>>) -> HashMap<String, Map<String, Value>> {
    page.iter()
        .filter(|(_, e)| !element::is_deleted(e))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Concurrent user and model edits, delivered in any interleaving,
    /// converge on both sides without losing an edit: an element only
    /// one side wrote keeps that side's last write; one both sides wrote
    /// keeps one of the two last writes; every added element exists.
    #[test]
    fn interleaved_edits_converge_without_loss(steps in proptest::collection::vec(step(), 1..60), nonces in proptest::collection::vec(any::<i32>(), 60)) {
        let initial = ["e0", "e1", "e2", "e3"];
        let mut board = board_with(&initial);
        let mut page: HashMap<String, Map<String, Value>> =
            board.all().iter().map(|e| (element::id(e).to_string(), e.clone())).collect();
        let mut to_page: VecDeque<Vec<Map<String, Value>>> = VecDeque::new();
        let mut to_board: VecDeque<Vec<Map<String, Value>>> = VecDeque::new();
        let mut last: HashMap<(String, &str), i64> = HashMap::new();
        let mut added = Vec::new();
        let mut deleted = Vec::new();
        let mut now = 10;
        for (n, s) in steps.iter().enumerate() {
            now += 1;
            let ids: Vec<String> = board.all().iter().map(|e| element::id(e).to_string()).collect();
            match s {
                Step::ModelEdit(i, x) => {
                    let id = &ids[i % ids.len()];
                    if board.get_live(id).is_some() {
                        let h = hash_of(&board, id);
                        let change = done(board.edit(&ops(json!([{"op": "update", "hash": h, "set": {"x": x}}])), "model", now).expect("edit"));
                        prop_assert_eq!(&change.changed, &vec![id.clone()]);
                        last.insert((id.clone(), "model"), *x);
                        to_page.push_back(vec![board.get(id).cloned().expect("el")]);
                    }
                }
                Step::UserEdit(i, x) => {
                    let pids: Vec<String> = { let mut v: Vec<String> = page.keys().cloned().collect(); v.sort(); v };
                    let id = &pids[i % pids.len()];
                    let mut el = page[id].clone();
                    if !element::is_deleted(&el) {
                        el.insert("x".into(), json!(x));
                        el.insert("version".into(), json!(element::version(&el) + 1));
                        el.insert("versionNonce".into(), json!(nonces[n % nonces.len()]));
                        page.insert(id.clone(), el.clone());
                        last.insert((id.clone(), "user"), *x);
                        to_board.push_back(vec![el]);
                    }
                }
                Step::ModelAdd => {
                    let change = done(board.edit(&ops(json!([{"op": "add", "element": {"type": "ellipse"}}])), "model", now).expect("add"));
                    let id = change.added[0].clone();
                    added.push(id.clone());
                    to_page.push_back(vec![board.get(&id).cloned().expect("el")]);
                }
                Step::UserAdd => {
                    let id = format!("u{n}");
                    let el = element::with_defaults("rectangle", &id, 1, now);
                    page.insert(id.clone(), el.clone());
                    added.push(id);
                    to_board.push_back(vec![el]);
                }
                Step::ModelDelete(i) => {
                    let id = &ids[i % ids.len()];
                    if board.get_live(id).is_some() {
                        let h = hash_of(&board, id);
                        done(board.edit(&ops(json!([{"op": "delete", "hash": h}])), "model", now).expect("delete"));
                        deleted.push(id.clone());
                        to_page.push_back(vec![board.get(id).cloned().expect("el")]);
                    }
                }
                Step::ToPage => {
                    if let Some(batch) = to_page.pop_front() {
                        page_merge(&mut page, batch);
                    }
                }
                Step::ToBoard => {
                    if let Some(batch) = to_board.pop_front() {
                        let (_, newer) = board.merge(batch.into_iter().map(Value::Object).collect()).expect("merge");
                        if !newer.is_empty() {
                            to_page.push_back(newer);
                        }
                    }
                }
            }
        }
        while !to_page.is_empty() || !to_board.is_empty() {
            if let Some(batch) = to_board.pop_front() {
                let (_, newer) = board.merge(batch.into_iter().map(Value::Object).collect()).expect("merge");
                if !newer.is_empty() {
                    to_page.push_back(newer);
                }
            }
            if let Some(batch) = to_page.pop_front() {
                page_merge(&mut page, batch);
            }
        }
        let board_live: HashMap<String, Map<String, Value>> =
            board.live().map(|e| (element::id(e).to_string(), e.clone())).collect();
        prop_assert_eq!(&board_live, &live_map(&page));
        for id in &added {
            prop_assert!(board.get(id).is_some(), "added element {} lost", id);
        }
        for (id, el) in &board_live {
            let model = last.get(&(id.clone(), "model"));
            let user = last.get(&(id.clone(), "user"));
            let x = el.get("x").and_then(Value::as_i64);
            match (model, user) {
                (Some(m), None) => prop_assert_eq!(x, Some(*m)),
                (None, Some(u)) => prop_assert_eq!(x, Some(*u)),
                (Some(m), Some(u)) => prop_assert!(x == Some(*m) || x == Some(*u)),
                (None, None) => {}
            }
        }
    }
}
