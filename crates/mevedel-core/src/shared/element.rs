//! One Excalidraw element as the board keeps it: a JSON object in
//! Excalidraw's own format (unknown keys survive a round trip), its hash,
//! its defaults, and the reconciliation rule that decides between two
//! versions of it.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// Keys that record who changed an element last rather than what it is:
/// left out of the hash so a hash names content, the same after a save
/// and a restore and whoever bumped the version.
const BOOKKEEPING: [&str; 3] = ["version", "versionNonce", "updated"];

/// The element types a model may add (Excalidraw's drawable types).
pub const TYPES: [&str; 10] = [
    "rectangle",
    "ellipse",
    "diamond",
    "text",
    "arrow",
    "line",
    "freedraw",
    "image",
    "frame",
    "embeddable",
];

/// True when ID is a valid item, element or image identity.
pub fn valid_id(id: &str) -> bool {
    (1..=80).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub fn id(element: &Map<String, Value>) -> &str {
    element.get("id").and_then(Value::as_str).unwrap_or("")
}

pub fn version(element: &Map<String, Value>) -> i64 {
    element.get("version").and_then(Value::as_i64).unwrap_or(0)
}

pub fn nonce(element: &Map<String, Value>) -> i64 {
    element
        .get("versionNonce")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

pub fn is_deleted(element: &Map<String, Value>) -> bool {
    element
        .get("isDeleted")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Excalidraw's reconciliation rule: REMOTE replaces LOCAL when its
/// version is higher, or equal with a lower versionNonce. A total order,
/// so every replica that has seen the same versions agrees.
pub fn remote_wins(local: &Map<String, Value>, remote: &Map<String, Value>) -> bool {
    let (lv, rv) = (version(local), version(remote));
    rv > lv || (rv == lv && nonce(remote) < nonce(local))
}

/// The canonical JSON of VALUE: object keys sorted at every depth, no
/// whitespace. Written here because serde_json keeps insertion order.
pub fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The element's hash: 8 hex digits of SHA-256 over its canonical JSON
/// without the bookkeeping keys.
pub fn hash(element: &Map<String, Value>) -> String {
    let mut content = element.clone();
    for key in BOOKKEEPING {
        content.remove(key);
    }
    let mut text = String::new();
    canonical(&Value::Object(content), &mut text);
    let digest = Sha256::digest(text.as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// A new element of TYPE with Excalidraw's defaults, under ID, drawn
/// with SEED; the caller's keys are laid over it.
pub fn with_defaults(kind: &str, id: &str, seed: i64, now_ms: i64) -> Map<String, Value> {
    let mut element = json!({
        "id": id,
        "type": kind,
        "x": 0, "y": 0, "width": 100, "height": 100, "angle": 0,
        "strokeColor": "#1e1e1e",
        "backgroundColor": "transparent",
        "fillStyle": "solid",
        "strokeWidth": 2,
        "strokeStyle": "solid",
        "roughness": 1,
        "opacity": 100,
        "groupIds": [],
        "frameId": null,
        "roundness": null,
        "seed": seed,
        "version": 1,
        "versionNonce": 0,
        "isDeleted": false,
        "boundElements": null,
        "updated": now_ms,
        "link": null,
        "locked": false,
    });
    let Value::Object(map) = &mut element else {
        return Map::new();
    };
    match kind {
        "text" => {
            for (k, v) in [
                ("text", json!("")),
                ("fontSize", json!(20)),
                ("fontFamily", json!(5)),
                ("textAlign", json!("left")),
                ("verticalAlign", json!("top")),
                ("containerId", Value::Null),
                ("originalText", json!("")),
                ("autoResize", json!(true)),
                ("lineHeight", json!(1.25)),
                ("width", json!(0)),
                ("height", json!(25)),
            ] {
                map.insert(k.into(), v);
            }
        }
        "arrow" | "line" => {
            for (k, v) in [
                ("points", json!([[0, 0], [100, 0]])),
                ("lastCommittedPoint", Value::Null),
                ("startBinding", Value::Null),
                ("endBinding", Value::Null),
                ("startArrowhead", Value::Null),
                (
                    "endArrowhead",
                    if kind == "arrow" {
                        json!("arrow")
                    } else {
                        Value::Null
                    },
                ),
                ("height", json!(0)),
            ] {
                map.insert(k.into(), v);
            }
        }
        "freedraw" => {
            map.insert("points".into(), json!([[0, 0]]));
            map.insert("pressures".into(), json!([]));
            map.insert("simulatePressure".into(), json!(true));
            map.insert("lastCommittedPoint".into(), Value::Null);
        }
        "image" => {
            map.insert("fileId".into(), Value::Null);
            map.insert("status".into(), json!("saved"));
            map.insert("scale".into(), json!([1, 1]));
            map.insert("crop".into(), Value::Null);
        }
        "frame" => {
            map.insert("name".into(), Value::Null);
        }
        _ => {}
    }
    map.clone()
}

/// The text an element shows: a text element's text, a frame's name.
pub fn text(element: &Map<String, Value>) -> Option<&str> {
    element
        .get("text")
        .or_else(|| element.get("name"))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn hash_ignores_bookkeeping_and_key_order() {
        let a = el(json!({"id": "a", "x": 1, "version": 3, "versionNonce": 7, "updated": 9}));
        let b = el(json!({"x": 1, "id": "a", "version": 4, "versionNonce": 2}));
        assert_eq!(hash(&a), hash(&b));
        let c = el(json!({"id": "a", "x": 2}));
        assert_ne!(hash(&a), hash(&c));
        assert_eq!(hash(&a).len(), 8);
    }

    #[test]
    fn higher_version_then_lower_nonce_wins() {
        let local = el(json!({"version": 2, "versionNonce": 5}));
        assert!(remote_wins(
            &local,
            &el(json!({"version": 3, "versionNonce": 9}))
        ));
        assert!(remote_wins(
            &local,
            &el(json!({"version": 2, "versionNonce": 4}))
        ));
        assert!(!remote_wins(
            &local,
            &el(json!({"version": 2, "versionNonce": 5}))
        ));
        assert!(!remote_wins(
            &local,
            &el(json!({"version": 1, "versionNonce": 0}))
        ));
    }

    #[test]
    fn ids_are_checked() {
        assert!(valid_id("a-B_9"));
        assert!(!valid_id(""));
        assert!(!valid_id("a/b"));
        assert!(!valid_id(&"x".repeat(81)));
    }
}
