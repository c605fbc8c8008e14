//! JSON in one canonical form: object keys sorted, whatever order a map kept them in.
//! Fingerprints and comparisons of JSON use it, so they never depend on whether serde_json
//! keeps maps sorted or in insertion order (its `preserve_order` feature, which a
//! dependency may turn on for the whole build).

use serde_json::Value;

/// Writes `value` with every object's keys sorted.
pub fn write<W: std::io::Write>(value: &Value, out: &mut W) -> serde_json::Result<()> {
    let punct = |out: &mut W, mark: &[u8]| out.write_all(mark).map_err(serde_json::Error::io);
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            punct(out, b"{")?;
            for (index, (key, inner)) in entries.into_iter().enumerate() {
                if index > 0 {
                    punct(out, b",")?;
                }
                serde_json::to_writer(&mut *out, key)?;
                punct(out, b":")?;
                write(inner, out)?;
            }
            punct(out, b"}")
        }
        Value::Array(items) => {
            punct(out, b"[")?;
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    punct(out, b",")?;
                }
                write(item, out)?;
            }
            punct(out, b"]")
        }
        other => serde_json::to_writer(out, other),
    }
}

/// `value` as canonical JSON text.
pub fn string(value: &Value) -> String {
    let mut out = Vec::new();
    // Writing into memory cannot fail, and the bytes are JSON text, so UTF-8.
    let _ = write(value, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_print_sorted_at_every_depth() {
        let mut outer = serde_json::Map::new();
        outer.insert("z".into(), json!([{"b": 1, "a": 2}]));
        outer.insert("a".into(), json!("x"));
        assert_eq!(
            string(&Value::Object(outer)),
            r#"{"a":"x","z":[{"a":2,"b":1}]}"#
        );
    }
}
