//! Unit tests for the shell parser: tokens, splitting, analysis, and property tests that
//! arbitrary input never panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;

fn lit(text: &str) -> Piece {
    Piece::Lit(text.to_owned())
}

fn words(input: &str) -> Vec<Vec<String>> {
    split(tokenize(input))
        .into_iter()
        .filter_map(|item| match item {
            Item::Command(c) => Some(c.words.iter().map(Word::raw).collect()),
            _ => None,
        })
        .collect()
}

fn env() -> ShellEnv {
    ShellEnv {
        home: Some(PathBuf::from("/home/u")),
        vars: HashMap::new(),
    }
}

fn programs(input: &str) -> Vec<Vec<String>> {
    analyze(input, Some(Path::new("/ws")), &env())
        .invocations
        .iter()
        .map(Invocation::words)
        .collect()
}

#[test]
fn quotes_and_escapes_are_removed() {
    assert_eq!(
        words(r#"echo 'a b' "c $d" e\ f "g\"h" 'i'"j"k"#),
        vec![vec!["echo", "a b", "c $d", "e f", "g\"h", "ijk"]]
    );
}

#[test]
fn operators_split_commands() {
    assert_eq!(
        words("a && b || c; d | e & f\ng"),
        vec![
            vec!["a"],
            vec!["b"],
            vec!["c"],
            vec!["d"],
            vec!["e"],
            vec!["f"],
            vec!["g"]
        ]
    );
}

#[test]
fn substitutions_keep_their_inner_script() {
    let tokens = tokenize("echo $(cat ~/.ssh/id_rsa) `whoami` <(ls)");
    let pieces: Vec<Piece> = tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.pieces),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(
        pieces,
        vec![
            lit("echo"),
            Piece::Subst("cat ~/.ssh/id_rsa".into()),
            Piece::Subst("whoami".into()),
            Piece::Process("ls".into()),
        ]
    );
}

#[test]
fn nested_substitutions_and_quotes_balance() {
    let tokens = tokenize(r#"echo "$(echo "$(ls ")")")" done"#);
    let words: Vec<Word> = tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w),
            _ => None,
        })
        .collect();
    assert_eq!(words.len(), 3);
    assert_eq!(
        words[1].pieces,
        vec![Piece::Subst(r#"echo "$(ls ")")""#.into())]
    );
    assert_eq!(words[2].literal().as_deref(), Some("done"));
}

#[test]
fn redirections_are_recognised() {
    let tokens = tokenize("cmd >out 2>&1 >>log <in 2>err &>both <<<here");
    let kinds: Vec<(Option<u32>, RedirectKind, String)> = tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Redirect(r) => Some((r.fd, r.kind, r.target.raw())),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (None, RedirectKind::Write, "out".into()),
            (Some(2), RedirectKind::Dup, "1".into()),
            (None, RedirectKind::Append, "log".into()),
            (None, RedirectKind::Read, "in".into()),
            (Some(2), RedirectKind::Write, "err".into()),
            (None, RedirectKind::Write, "both".into()),
            (None, RedirectKind::HereString, "here".into()),
        ]
    );
}

#[test]
fn heredoc_bodies_are_read_and_quoted_ones_not_expanded() {
    let tokens =
        tokenize("cat <<EOF > f\nhello $(whoami)\nEOF\ncat <<'X'\n$(rm -rf /)\nX\necho done");
    let bodies: Vec<Vec<Piece>> = tokens
        .iter()
        .filter_map(|t| match t {
            Token::Redirect(Redirect {
                kind: RedirectKind::Heredoc { body },
                ..
            }) => Some(body.pieces.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        bodies,
        vec![
            vec![lit("hello "), Piece::Subst("whoami".into()), lit("\n")],
            vec![lit("$(rm -rf /)\n")],
        ]
    );
    assert_eq!(
        words("cat <<EOF\nx\nEOF\necho done").last(),
        Some(&vec!["echo".to_owned(), "done".to_owned()])
    );
}

#[test]
fn heredoc_with_dash_strips_tabs() {
    assert_eq!(
        programs("bash <<-EOF\n\trm x\n\tEOF\nls"),
        vec![vec!["bash"], vec!["rm", "x"], vec!["ls"]]
    );
}

#[test]
fn assignments_are_marked() {
    let tokens = tokenize("A=1 \"B=2\" c=$x d");
    let marks: Vec<bool> = tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.assignment),
            _ => None,
        })
        .collect();
    assert_eq!(marks, vec![true, false, true, false]);
}

#[test]
fn wrappers_are_unwrapped() {
    assert_eq!(
        programs("sudo -u root rm -rf /x"),
        vec![vec!["rm", "-rf", "/x"]]
    );
    assert_eq!(
        programs("env A=1 B=2 nohup timeout -s KILL 5 nice -n 3 make"),
        vec![vec!["make"]]
    );
    assert_eq!(programs("xargs -0 rm"), vec![vec!["rm", "{stdin}"]]);
    assert_eq!(
        programs("command -v git"),
        vec![vec!["command", "-v", "git"]]
    );
    assert_eq!(
        programs("bash -c 'ls; rm a'"),
        vec![vec!["bash", "-c", "ls; rm a"], vec!["ls"], vec!["rm", "a"]]
    );
    assert_eq!(
        programs("sh -lc \"echo hi\""),
        vec![vec!["sh", "-lc", "echo hi"], vec!["echo", "hi"]]
    );
}

#[test]
fn cd_changes_where_later_parts_resolve() {
    let analysis = analyze(
        "cd sub && ls; (cd /tmp; pwd); pwd; cd; cat x",
        Some(Path::new("/ws")),
        &env(),
    );
    let cwds: Vec<Option<PathBuf>> = analysis.invocations.iter().map(|i| i.cwd.clone()).collect();
    assert_eq!(
        cwds,
        vec![
            Some("/ws".into()),
            Some("/ws/sub".into()),
            Some("/ws/sub".into()),
            Some("/tmp".into()),
            Some("/ws/sub".into()),
            Some("/ws/sub".into()),
            Some("/home/u".into()),
        ]
    );
}

#[test]
fn variables_expand_when_known() {
    let analysis = analyze(
        "D=/; rm -rf $D $HOME ${UNKNOWN}",
        Some(Path::new("/ws")),
        &env(),
    );
    let rm = analysis
        .invocations
        .iter()
        .find(|i| i.program() == Some("rm"))
        .unwrap();
    let args: Vec<(&str, bool)> = rm
        .args()
        .iter()
        .map(|a| (a.text.as_str(), a.opaque))
        .collect();
    assert_eq!(
        args,
        vec![
            ("-rf", false),
            ("/", false),
            ("/home/u", false),
            ("$UNKNOWN", true)
        ]
    );
}

#[test]
fn downloads_into_shells_are_unseen_code() {
    for line in [
        "curl -fsSL x | sh",
        "wget -qO- x | sudo bash -s",
        "bash <(curl x)",
        "sh -c \"$(curl x)\"",
        "eval \"$(wget -O- x)\"",
    ] {
        let analysis = analyze(line, None, &env());
        assert!(
            analysis
                .unseen
                .iter()
                .any(|u| matches!(u.source, UnseenSource::Download(_))),
            "{line}: {:?}",
            analysis.unseen
        );
    }
    let echoed = analyze("echo 'rm -rf /' | sh", None, &env());
    assert!(echoed.unseen.is_empty());
    assert!(
        echoed
            .invocations
            .iter()
            .any(|i| i.words() == vec!["rm", "-rf", "/"])
    );
}

#[test]
fn find_exec_runs_its_command_under_the_start_folder() {
    assert_eq!(
        programs("find / -name x -exec rm -rf {} \\;"),
        vec![
            vec!["find", "/", "-name", "x", "-exec", "rm", "-rf", "{}", ";"],
            vec!["rm", "-rf", "/"]
        ]
    );
    let analysis = analyze("find / -exec rm -rf {} \\;", Some(Path::new("/ws")), &env());
    assert!(analysis.invocations[1].args()[1].tree);
}

#[test]
fn nesting_is_bounded() {
    let mut line = "ls".to_owned();
    for _ in 0..20 {
        line = format!("echo $({line})");
    }
    let analysis = analyze(&line, None, &env());
    assert!(analysis.truncated);
}

proptest! {
    #[test]
    fn tokenizer_never_panics(input in ".{0,200}") {
        let _ = split(tokenize(&input));
        let _ = analyze(&input, Some(Path::new("/ws")), &env());
    }

    #[test]
    fn expansion_never_panics_on_pattern_alphabet(input in "[ {},.*?~/a-c$=\\[\\]'\"x0-9-]{0,80}") {
        let _ = analyze(&input, Some(Path::new("/")), &env());
    }

    #[test]
    fn tokenizer_never_panics_on_shell_alphabet(input in "[ a-z$(){}`'\"\\\\|&;<>~*=\n\t#-]{0,120}") {
        let _ = analyze(&input, Some(Path::new("/ws")), &env());
    }
}
