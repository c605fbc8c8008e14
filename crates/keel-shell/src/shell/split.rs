//! The splitter: groups tokens into simple commands at control operators, numbering
//! pipelines and their stages, and strips the reserved words of compound commands
//! (`if`, `while`, `for x in`, …) so only what runs is left.

use super::word::{Operator, Redirect, Token, Word};

/// A piece of a command list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A simple command.
    Command(SimpleCommand),
    /// `(`: a subshell starts; `cd` inside it does not leak out.
    Open,
    /// `)`
    Close,
}

/// Words and redirections between two control operators.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    /// The words, assignments first.
    pub words: Vec<Word>,
    /// The redirections.
    pub redirects: Vec<Redirect>,
    /// Which pipeline of the script it belongs to.
    pub pipeline: usize,
    /// Its position in that pipeline.
    pub stage: usize,
}

/// Reserved words that open or close a compound command; stripped from the front of a command.
const KEYWORDS: &[&str] = &[
    "{", "}", "!", "if", "then", "else", "elif", "fi", "while", "until", "do", "done", "esac",
    "function",
];

/// Groups tokens into simple commands at `&&`, `||`, `;`, `|`, `&`, newlines and parentheses.
pub fn split(tokens: Vec<Token>) -> Vec<Item> {
    let mut items = Vec::new();
    let mut current = SimpleCommand::default();
    let mut pipeline = 0usize;
    let mut stage = 0usize;
    let finish = |current: &mut SimpleCommand, items: &mut Vec<Item>| {
        let mut command = std::mem::take(current);
        let keyword_count = command
            .words
            .iter()
            .take_while(|w| {
                !w.quoted && w.literal().is_some_and(|t| KEYWORDS.contains(&t.as_str()))
            })
            .count();
        command.words.drain(..keyword_count);
        // `for x in …`, `case x in`, `select`: the header runs nothing.
        let header = command
            .words
            .first()
            .and_then(Word::literal)
            .is_some_and(|t| matches!(t.as_str(), "for" | "case" | "select" | "in"));
        if header {
            command.words.clear();
        }
        if !command.words.is_empty() || !command.redirects.is_empty() {
            items.push(Item::Command(command));
        }
    };
    for token in tokens {
        match token {
            Token::Word(word) => current.words.push(word),
            Token::Redirect(redirect) => current.redirects.push(redirect),
            Token::Op(Operator::Pipe) => {
                current.pipeline = pipeline;
                current.stage = stage;
                finish(&mut current, &mut items);
                stage += 1;
            }
            Token::Op(op) => {
                current.pipeline = pipeline;
                current.stage = stage;
                finish(&mut current, &mut items);
                pipeline += 1;
                stage = 0;
                match op {
                    Operator::Open => items.push(Item::Open),
                    Operator::Close => items.push(Item::Close),
                    _ => {}
                }
            }
        }
    }
    current.pipeline = pipeline;
    current.stage = stage;
    finish(&mut current, &mut items);
    items
}
