//! Citations in a final answer: the forms models write (`[S1]`, `[source: S1]`, `[S1, S2]`,
//! `[^S1]`, `【S1】`, `(S1)`) become `[S1]`, for sources the session knows; others are left
//! as written.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

static CITATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:\[\^?|【|\()\s*(?:sources?\s*[:#]?\s*)?(s\d{1,4}(?:\s*[,;]\s*(?:sources?\s*[:#]?\s*)?s\d{1,4})*)\s*(?:\]|】|\))",
    )
    .ok()
});

static ID: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"(?i)s(\d{1,4})").ok());

/// `text` with citations of known ids in canonical form, and the known ids it cites.
pub fn normalise(text: &str, known: &dyn Fn(&str) -> bool) -> (String, BTreeSet<String>) {
    let mut cited = BTreeSet::new();
    let (Some(citation), Some(id)) = (CITATION.as_ref(), ID.as_ref()) else {
        return (text.to_owned(), cited);
    };
    let out = citation.replace_all(text, |caps: &regex::Captures<'_>| {
        let ids: Vec<String> = id
            .captures_iter(&caps[1])
            .map(|c| format!("S{}", c[1].trim_start_matches('0')))
            .collect();
        if ids.is_empty() || !ids.iter().all(|i| known(i)) {
            return caps[0].to_owned();
        }
        let mut canonical = String::new();
        for i in ids {
            canonical.push_str(&format!("[{i}]"));
            cited.insert(i);
        }
        canonical
    });
    (out.into_owned(), cited)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(id: &str) -> bool {
        matches!(id, "S1" | "S2" | "S12")
    }

    #[test]
    fn citation_forms_become_canonical_for_known_sources() {
        let (text, cited) = normalise(
            "A [S1]. B [source: s2]. C [S1, S2]. D [^S12]. E 【S1】. F (S2). G [S7]. H [1].",
            &known,
        );
        assert_eq!(
            text,
            "A [S1]. B [S2]. C [S1][S2]. D [S12]. E [S1]. F [S2]. G [S7]. H [1]."
        );
        assert_eq!(cited.into_iter().collect::<Vec<_>>(), ["S1", "S12", "S2"]);
    }

    #[test]
    fn text_without_citations_is_unchanged() {
        let (text, cited) = normalise("Nothing cited (see below).", &known);
        assert_eq!(text, "Nothing cited (see below).");
        assert!(cited.is_empty());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Normalising twice changes nothing more, only known ids are ever cited, and text
        /// without brackets is never touched.
        #[test]
        fn normalising_is_stable_and_cites_only_known_sources(text in "[ -~【】]{0,120}") {
            let known = |id: &str| matches!(id, "S1" | "S2" | "S3");
            let (once, cited) = normalise(&text, &known);
            let (twice, again) = normalise(&once, &known);
            prop_assert_eq!(&once, &twice);
            prop_assert_eq!(&cited, &again);
            prop_assert!(cited.iter().all(|id| known(id)));
            if !text.contains(['[', '(', '【']) {
                prop_assert_eq!(once, text);
            }
        }
    }
}
