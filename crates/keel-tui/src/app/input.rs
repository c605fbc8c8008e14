//! Keys and pastes: popups first, then the bound actions, then the composer's editing.

use std::time::Instant;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use keel_protocol::ops;
use keel_protocol::{InputKind, Op, PermissionAnswer, PermissionMode};

use super::popup::{PickItem, Picker, PickerKind, Popup, Stage};
use super::{App, DOUBLE_PRESS, Effect, Tag};
use crate::cells::{Cell, Tone};
use crate::keys::Action;

impl App {
    pub(super) fn term_event(&mut self, event: Event, effects: &mut Vec<Effect>) {
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => self.key(key, effects),
            Event::Paste(text) => {
                if let Some(Popup::Permission(p)) = &mut self.popup
                    && let Stage::Reason(reason) = &mut p.stage
                {
                    reason.paste(&text);
                    return;
                }
                if let Some(Popup::Question(q)) = &mut self.popup {
                    q.paste(&text);
                    return;
                }
                // A dropped or pasted image file goes with the message as an image.
                if let Some((image, name)) = crate::outside::pasted_image(&text, &self.info.cwd) {
                    self.images.push(image);
                    self.composer
                        .insert(&format!("[image {}: {name}] ", self.images.len()));
                    self.refresh_popup();
                    return;
                }
                self.composer.paste(&text);
                self.refresh_popup();
            }
            Event::Resize(width, _) => self.width = width,
            Event::FocusGained => self.focused = true,
            Event::FocusLost => self.focused = false,
            _ => {}
        }
    }

    /// Tells a terminal out of focus that keel needs the user (`tui.notifications`).
    pub(super) fn attention(&mut self, text: String, effects: &mut Vec<Effect>) {
        if !self.focused
            && self.info.notifications != keel_runtime::settings::extend::Notifications::Off
        {
            effects.push(Effect::Notify(text));
        }
    }

    fn key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) {
        if self.popup.is_some() && self.popup_key(key, effects) {
            return;
        }
        let action = self.keys.action(&key);
        if action != Some(Action::Interrupt) {
            self.last_esc = None;
        }
        if action != Some(Action::Clear) {
            self.last_ctrl_c = None;
        }
        match action {
            Some(Action::Submit) => self.submit(InputKind::Steer, effects),
            Some(Action::Queue) => self.submit(InputKind::FollowUp, effects),
            Some(Action::Newline) => self.composer.insert("\n"),
            Some(Action::Interrupt) => self.interrupt(effects),
            Some(Action::CycleMode) => {
                self.set_mode(self.info.mode.next(), effects);
            }
            Some(Action::Clear) => {
                if !self.composer.is_empty() {
                    self.composer.clear();
                    self.images.clear();
                    self.editing_queued = None;
                    self.last_ctrl_c = Some(Instant::now());
                } else if self.last_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                    self.quit(effects);
                } else {
                    self.last_ctrl_c = Some(Instant::now());
                    self.notice(Tone::Info, "press Ctrl+C again to quit");
                }
            }
            Some(Action::Exit) => {
                if self.composer.is_empty() {
                    self.quit(effects);
                } else {
                    self.composer.delete();
                }
            }
            Some(Action::HistorySearch) => {
                let items = self
                    .history
                    .iter()
                    .rev()
                    .map(|text| PickItem {
                        label: text.lines().next().unwrap_or_default().to_owned(),
                        detail: String::new(),
                        value: text.clone(),
                        revision: None,
                    })
                    .collect();
                self.popup = Some(Popup::Picker(Picker::new(
                    PickerKind::History,
                    "Search prompts",
                    items,
                )));
            }
            Some(Action::Todos) => self.popup = Some(Popup::Todos),
            Some(Action::Editor) => effects.push(Effect::Editor(self.composer.expanded())),
            Some(Action::ToggleExpand) => {
                self.expanded = !self.expanded;
                let width = self.width as usize;
                let lines = self
                    .transcript
                    .iter()
                    .flat_map(|c| c.lines(width, true))
                    .collect();
                effects.push(Effect::Pager(lines));
            }
            Some(Action::PullQueued) => {
                if let (Some(entry), Some(session_id)) =
                    (self.queue.last().cloned(), self.session_id())
                {
                    if self.composer.is_empty() {
                        self.composer.set(&entry.text);
                    } else {
                        self.composer.insert(&format!("\n{}", entry.text));
                    }
                    effects.push(Effect::Call(
                        Tag::Plain("cannot take the queued message back"),
                        Op::CancelQueued(ops::CancelQueued {
                            session_id,
                            input_id: entry.id,
                        }),
                    ));
                }
            }
            Some(Action::Suspend) => effects.push(Effect::Suspend),
            None => self.edit(key),
        }
        self.refresh_popup();
    }

    pub(super) fn quit(&mut self, effects: &mut Vec<Effect>) {
        self.quitting = true;
        if self.busy()
            && let Some(session_id) = self.session_id()
        {
            effects.push(Effect::Call(
                Tag::Plain("cannot interrupt"),
                Op::Abort(ops::Abort { session_id }),
            ));
        }
        effects.push(Effect::Exit);
    }

    fn interrupt(&mut self, effects: &mut Vec<Effect>) {
        if self.busy() {
            if let Some(session_id) = self.session_id() {
                self.live.interrupting = true;
                effects.push(Effect::Call(
                    Tag::Plain("cannot interrupt"),
                    Op::Abort(ops::Abort { session_id }),
                ));
            }
            return;
        }
        if !self.composer.is_empty() {
            return;
        }
        if self.last_esc.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
            self.last_esc = None;
            self.open_rewind(effects);
        } else {
            self.last_esc = Some(Instant::now());
        }
    }

    /// Enter and Alt+Enter: a command, a new turn, a steer or a follow-up.
    fn submit(&mut self, kind: InputKind, effects: &mut Vec<Effect>) {
        let text = self.composer.expanded();
        if text.trim().is_empty() {
            return;
        }
        if let Some((name, args)) = crate::slash::parse(text.trim())
            && self.catalog.find(name).is_some()
        {
            self.composer.clear();
            self.run_command(name, args, effects);
            return;
        }
        let Some(session_id) = self.session_id() else {
            return;
        };
        if self.editing_queued.is_none() && crate::composer::shell_line(&self.composer) {
            self.run_shell(session_id, effects);
            return;
        }
        let text = self.composer.take();
        self.sent(&text);
        if let Some(input_id) = self.editing_queued.take() {
            effects.push(Effect::Call(
                Tag::Plain("cannot edit the queued message"),
                Op::EditQueued(ops::EditQueued {
                    session_id,
                    input_id,
                    text,
                }),
            ));
            return;
        }
        if self.busy() {
            if !self.images.is_empty() {
                self.images.clear();
                self.notice(
                    Tone::Info,
                    "pasted images go only with a message that starts a turn: paste them again after this one",
                );
            }
            if kind == InputKind::Steer {
                self.push(Cell::Steer(text.clone()));
            } else {
                self.notice(
                    Tone::Info,
                    format!("queued for after this turn: {}", first_line(&text)),
                );
            }
            effects.push(Effect::Call(
                Tag::Enqueue,
                Op::Enqueue(ops::Enqueue {
                    session_id,
                    kind,
                    text,
                    source: keel_protocol::TurnSource::Api,
                }),
            ));
            return;
        }
        self.start_turn(text, effects);
    }

    /// `!command` typed in the composer: runs it in the session's shell, its output kept
    /// as context (`!!command`: not kept). Only what the user typed gets here, never a
    /// command's or a skill's expansion. Waits for no turn: refused while one runs.
    fn run_shell(&mut self, session_id: keel_protocol::SessionId, effects: &mut Vec<Effect>) {
        if self.busy() {
            self.notice(
                Tone::Info,
                "a `!` command runs between turns: wait for this one, or press Esc to stop it",
            );
            return;
        }
        let typed = self.composer.take();
        let Some((command, remember)) = ops::RunShell::typed(&typed) else {
            return;
        };
        if command.is_empty() {
            self.composer.set(&typed);
            self.notice(Tone::Info, "type a command after `!`, as in `!git status`");
            return;
        }
        self.sent(&typed);
        self.push(Cell::User(typed.clone()));
        self.live.begin(None);
        self.live.shell = true;
        effects.push(Effect::Call(
            Tag::Shell(typed),
            Op::RunShell(ops::RunShell {
                session_id,
                command,
                remember,
            }),
        ));
    }

    /// `text` was sent: Up recalls it, here and in later sessions of the folder.
    pub(super) fn sent(&mut self, text: &str) {
        self.history_at = None;
        if self.history.last().map(String::as_str) != Some(text) {
            self.history.push(text.to_owned());
            if self.info.keel_home.is_some() {
                self.to_remember.push(text.to_owned());
            }
        }
    }

    /// Shows the message and starts a turn with it (and the images pasted for it).
    pub(super) fn start_turn(&mut self, text: String, effects: &mut Vec<Effect>) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        self.push(Cell::User(text.clone()));
        self.live.begin(Some(text.clone()));
        // Only images whose placeholder is still in the message go with it; kept until the
        // turn starts, so a refused message comes back whole.
        let images: Vec<keel_protocol::ImageBlock> = std::mem::take(&mut self.images)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| text.contains(&format!("[image {}:", i + 1)))
            .map(|(_, image)| image)
            .collect();
        self.unsent_images.clone_from(&images);
        effects.push(Effect::Call(
            Tag::Submit(text.clone()),
            Op::Submit(ops::Submit {
                session_id,
                text,
                images,
                source: keel_protocol::TurnSource::Api,
                output_schema: None,
                time_budget_ms: None,
            }),
        ));
    }

    /// Plain editing keys.
    fn edit(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let c = &mut self.composer;
        match key.code {
            KeyCode::Char('a') if ctrl => c.home(),
            KeyCode::Char('e') if ctrl => c.end(),
            KeyCode::Char('b') if ctrl => c.left(),
            KeyCode::Char('f') if ctrl => c.right(),
            KeyCode::Char('b') if alt => c.word_back(),
            KeyCode::Char('f') if alt => c.word_forward(),
            KeyCode::Char('d') if alt => c.kill_word_forward(),
            KeyCode::Char('k') if ctrl => c.kill_to_end(),
            KeyCode::Char('u') if ctrl => c.kill_to_start(),
            KeyCode::Char('w') if ctrl => c.kill_word_back(),
            KeyCode::Char('h') if ctrl => c.backspace(),
            KeyCode::Char('y') if ctrl => c.yank(),
            KeyCode::Char('p') if ctrl => self.history_step(-1),
            KeyCode::Char('n') if ctrl => self.history_step(1),
            KeyCode::Backspace if alt || ctrl => c.kill_word_back(),
            KeyCode::Backspace => c.backspace(),
            KeyCode::Delete => c.delete(),
            KeyCode::Left if ctrl || alt => c.word_back(),
            KeyCode::Right if ctrl || alt => c.word_forward(),
            KeyCode::Left => c.left(),
            KeyCode::Right => c.right(),
            KeyCode::Home => c.home(),
            KeyCode::End => c.end(),
            KeyCode::Up if c.on_first_line() => self.history_step(-1),
            KeyCode::Down if c.on_last_line() => self.history_step(1),
            KeyCode::Up => c.up(),
            KeyCode::Down => c.down(),
            KeyCode::Tab => {}
            KeyCode::Char(ch) if !ctrl => {
                let mut buf = [0u8; 4];
                c.insert(ch.encode_utf8(&mut buf));
            }
            _ => {}
        }
    }

    /// Up and Down through sent prompts when the cursor is on the first or last line.
    fn history_step(&mut self, delta: isize) {
        if self.history.is_empty() {
            return;
        }
        let next = match (self.history_at, delta < 0) {
            (None, true) if self.composer.is_empty() => self.history.len() - 1,
            (None, _) => return,
            (Some(0), true) => 0,
            (Some(i), true) => i - 1,
            (Some(i), false) if i + 1 >= self.history.len() => {
                self.history_at = None;
                self.composer.clear();
                return;
            }
            (Some(i), false) => i + 1,
        };
        self.history_at = Some(next);
        let text = self.history[next].clone();
        self.composer.set(&text);
    }

    /// Opens or closes the completion popups as the composer changes.
    pub(super) fn refresh_popup(&mut self) {
        let wants_slash = {
            let text = self.composer.text();
            text.starts_with('/') && !text.contains(char::is_whitespace)
        };
        let wants_files = self.composer.token_at_cursor('@').is_some();
        match &self.popup {
            Some(p) if !p.is_completion() => {}
            _ if wants_slash => {
                let keep = matches!(self.popup, Some(Popup::Slash(_)));
                if !keep {
                    self.popup = Some(Popup::Slash(0));
                    // Skills, command files and MCP prompts change while keel runs.
                    self.commands_requested = true;
                }
                let count = self.catalog.filter(&self.composer.text()[1..]).len();
                if let Some(Popup::Slash(selected)) = &mut self.popup {
                    *selected = (*selected).min(count.saturating_sub(1));
                }
            }
            _ if wants_files => {
                if self.files.is_none() {
                    self.files_requested = true;
                }
                if !matches!(self.popup, Some(Popup::Files { .. })) {
                    // Servers' resources change while keel runs.
                    self.mentions_requested = true;
                }
                // Searched once per change of the `@` word, never per frame.
                let matches = self.file_matches();
                let selected = match &self.popup {
                    Some(Popup::Files { selected, .. }) => {
                        (*selected).min(matches.len().saturating_sub(1))
                    }
                    _ => 0,
                };
                self.popup = Some(Popup::Files { selected, matches });
            }
            _ => self.popup = None,
        }
    }

    /// Completions for the `@` word at the cursor: files, and MCP resources
    /// (`server:uri`), the resources first once the word has a `:`.
    fn file_matches(&self) -> Vec<(String, bool)> {
        let Some((_, query)) = self.composer.token_at_cursor('@') else {
            return Vec::new();
        };
        let rows = super::popup::POPUP_ROWS;
        let files = match &self.files {
            Some(index) => index.search(query, rows),
            None => Vec::new(),
        };
        let sourced: Vec<(String, bool)> =
            super::popup::mention_matches(&self.mentions, query, rows)
                .into_iter()
                .map(|text| (text, false))
                .collect();
        let (first, then) = if query.contains(':') {
            (sourced, files)
        } else {
            (files, sourced)
        };
        first.into_iter().chain(then).take(rows).collect()
    }

    /// Keys while a popup is open; `true` when the key was used.
    fn popup_key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) -> bool {
        let Some(popup) = self.popup.take() else {
            return false;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match popup {
            Popup::Slash(selected) => {
                let matches: Vec<(String, bool)> = self
                    .catalog
                    .filter(&self.composer.text()[1..])
                    .iter()
                    .map(|c| (c.name.clone().into_owned(), c.needs_args()))
                    .collect();
                let count = matches.len().max(1);
                match key.code {
                    KeyCode::Up => self.popup = Some(Popup::Slash((selected + count - 1) % count)),
                    KeyCode::Down => self.popup = Some(Popup::Slash((selected + 1) % count)),
                    KeyCode::Tab => {
                        if let Some((name, _)) = matches.get(selected) {
                            self.composer.set(&format!("/{name} "));
                        }
                    }
                    KeyCode::Enter if key.modifiers.is_empty() => match matches.get(selected) {
                        // Its arguments are typed first.
                        Some((name, true)) => self.composer.set(&format!("/{name} ")),
                        Some((name, false)) => {
                            self.composer.clear();
                            self.run_command(name, "", effects);
                        }
                        None => {}
                    },
                    KeyCode::Esc => self.composer.clear(),
                    _ => {
                        self.popup = Some(Popup::Slash(selected));
                        return false;
                    }
                }
                true
            }
            Popup::Files { selected, matches } => {
                let count = matches.len().max(1);
                match key.code {
                    KeyCode::Up => {
                        let selected = (selected + count - 1) % count;
                        self.popup = Some(Popup::Files { selected, matches });
                    }
                    KeyCode::Down => {
                        let selected = (selected + 1) % count;
                        self.popup = Some(Popup::Files { selected, matches });
                    }
                    KeyCode::Tab | KeyCode::Enter if !matches.is_empty() => {
                        if let (Some((path, dir)), Some((start, _))) =
                            (matches.get(selected), self.composer.token_at_cursor('@'))
                        {
                            let text = if *dir {
                                format!("@{path}")
                            } else {
                                format!("@{path} ")
                            };
                            self.composer.replace_token(start, &text);
                        }
                        self.refresh_popup();
                    }
                    KeyCode::Esc => {}
                    _ => {
                        self.popup = Some(Popup::Files { selected, matches });
                        return false;
                    }
                }
                true
            }
            Popup::Todos => {
                // Any key closes it; Esc and Ctrl+T only close it, others also act.
                key.code == KeyCode::Esc || self.keys.action(&key) == Some(Action::Todos)
            }
            Popup::Permission(prompt) => {
                self.permission_key(prompt, key, effects);
                true
            }
            Popup::Question(prompt) => {
                self.question_key(prompt, key, effects);
                true
            }
            Popup::Task(task) => {
                self.task_key(task, key, effects);
                true
            }
            Popup::Picker(mut picker) => {
                if let Some((id, mut title)) = picker.renaming.take() {
                    match key.code {
                        KeyCode::Enter => {
                            let title_text = title.take();
                            effects.push(Effect::Call(
                                Tag::Plain("cannot rename"),
                                Op::UpdateSession(ops::UpdateSession {
                                    session_id: id.as_str().into(),
                                    title: Some(title_text.clone()),
                                    model: None,
                                    mode: None,
                                    thinking: None,
                                }),
                            ));
                            for item in &mut picker.items {
                                if item.value == id {
                                    item.label = title_text.clone();
                                }
                            }
                        }
                        KeyCode::Esc => {}
                        KeyCode::Backspace => {
                            title.backspace();
                            picker.renaming = Some((id, title));
                        }
                        KeyCode::Char(ch) if !ctrl => {
                            title.insert(&ch.to_string());
                            picker.renaming = Some((id, title));
                        }
                        _ => picker.renaming = Some((id, title)),
                    }
                    self.popup = Some(Popup::Picker(picker));
                    return true;
                }
                match key.code {
                    KeyCode::Esc => return true,
                    KeyCode::Up => picker.step(-1),
                    KeyCode::Down | KeyCode::Tab => picker.step(1),
                    KeyCode::Enter => {
                        if let Some(item) = picker.current() {
                            self.picked(picker.kind, item, effects);
                        }
                        return true;
                    }
                    KeyCode::Backspace => {
                        picker.filter.pop();
                        picker.selected = 0;
                    }
                    KeyCode::Char('r') if ctrl && picker.kind == PickerKind::Sessions => {
                        if let Some(item) = picker.current() {
                            let mut title = crate::composer::Composer::new();
                            title.set(&item.label);
                            picker.renaming = Some((item.value, title));
                        }
                    }
                    KeyCode::Char('d') if ctrl && picker.kind == PickerKind::Sessions => {
                        if let Some(item) = picker.current() {
                            if self.session_id().is_some_and(|s| s.as_str() == item.value) {
                                self.notice(Tone::Warn, "this is the open session: switch to another before deleting it");
                            } else if picker.confirm_delete.as_deref() == Some(item.value.as_str())
                            {
                                effects.push(Effect::Call(
                                    Tag::Plain("cannot delete the session"),
                                    Op::DeleteSession(ops::DeleteSession {
                                        session_id: item.value.as_str().into(),
                                    }),
                                ));
                                picker.items.retain(|i| i.value != item.value);
                                picker.confirm_delete = None;
                                picker.selected = 0;
                            } else {
                                picker.confirm_delete = Some(item.value);
                            }
                        }
                    }
                    KeyCode::Delete | KeyCode::Char('d')
                        if picker.kind == PickerKind::Queue
                            && (ctrl || key.code == KeyCode::Delete) =>
                    {
                        if let (Some(item), Some(session_id)) =
                            (picker.current(), self.session_id())
                        {
                            effects.push(Effect::Call(
                                Tag::Plain("cannot cancel the queued message"),
                                Op::CancelQueued(ops::CancelQueued {
                                    session_id,
                                    input_id: item.value.clone(),
                                }),
                            ));
                            picker.items.retain(|i| i.value != item.value);
                            picker.selected = 0;
                        }
                    }
                    KeyCode::Char(ch) if !ctrl => {
                        picker.filter.push(ch);
                        picker.selected = 0;
                    }
                    _ => {}
                }
                self.popup = Some(Popup::Picker(picker));
                true
            }
        }
    }

    fn permission_key(
        &mut self,
        mut prompt: super::popup::PermissionPrompt,
        key: KeyEvent,
        effects: &mut Vec<Effect>,
    ) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        // The change's preview scrolls and expands whatever the stage.
        match key.code {
            KeyCode::PageDown => prompt.scroll += crate::render::PREVIEW_STEP,
            KeyCode::PageUp => prompt.scroll -= crate::render::PREVIEW_STEP,
            _ if self.keys.action(&key) == Some(Action::ToggleExpand) => {
                self.expanded = !self.expanded;
            }
            _ => {
                return self.permission_answer(prompt, key, effects, session_id);
            }
        }
        self.popup = Some(Popup::Permission(prompt));
    }

    /// A key that answers or moves through the permission prompt's stages.
    fn permission_answer(
        &mut self,
        mut prompt: super::popup::PermissionPrompt,
        key: KeyEvent,
        effects: &mut Vec<Effect>,
        session_id: keel_protocol::SessionId,
    ) {
        let request_id = prompt.request.id.clone();
        let answer = |answer: PermissionAnswer| {
            Effect::Call(
                Tag::Plain("the answer was not accepted"),
                Op::AnswerPermission(ops::AnswerPermission {
                    session_id: session_id.clone(),
                    request_id: request_id.clone(),
                    answer,
                }),
            )
        };
        let can_always = !prompt.request.safety && !prompt.request.scopes.is_empty();
        let scopes = prompt.request.scopes.len();
        match &mut prompt.stage {
            Stage::Choose(selected) => {
                let pick = match key.code {
                    KeyCode::Char('1') | KeyCode::Char('y') => Some(0),
                    KeyCode::Char('2') | KeyCode::Char('a') if can_always => Some(1),
                    KeyCode::Char('3') => Some(2),
                    // The other scopes, one key away (with the rule each saves).
                    KeyCode::Char('s') if can_always => {
                        prompt.stage = Stage::Scope(0);
                        None
                    }
                    KeyCode::Char('n') => {
                        effects.push(answer(PermissionAnswer::Deny { reason: None }));
                        return;
                    }
                    KeyCode::Esc => {
                        effects.push(answer(PermissionAnswer::Deny { reason: None }));
                        if self.busy() {
                            self.interrupt(effects);
                        }
                        return;
                    }
                    KeyCode::Up => {
                        *selected = selected.checked_sub(1).unwrap_or(2);
                        if *selected == 1 && !can_always {
                            *selected = 0;
                        }
                        None
                    }
                    KeyCode::Down => {
                        *selected = (*selected + 1) % 3;
                        if *selected == 1 && !can_always {
                            *selected = 2;
                        }
                        None
                    }
                    KeyCode::Enter => Some(*selected),
                    _ => None,
                };
                match pick {
                    Some(0) => {
                        effects.push(answer(PermissionAnswer::AllowOnce));
                        return;
                    }
                    // "Always" in one step: the narrowest scope, which the option names.
                    Some(1) => {
                        effects.push(answer(PermissionAnswer::AllowAlways { scope: 0 }));
                        return;
                    }
                    Some(_) => prompt.stage = Stage::Reason(crate::composer::Composer::new()),
                    None => {}
                }
            }
            Stage::Scope(selected) => match key.code {
                KeyCode::Up => *selected = selected.checked_sub(1).unwrap_or(scopes - 1),
                KeyCode::Down => *selected = (*selected + 1) % scopes,
                KeyCode::Char(c @ '1'..='9') if (c as usize - '1' as usize) < scopes => {
                    prompt.stage = Stage::Confirm(c as usize - '1' as usize);
                }
                KeyCode::Enter => prompt.stage = Stage::Confirm(*selected),
                KeyCode::Esc => prompt.stage = Stage::Choose(1),
                _ => {}
            },
            Stage::Confirm(scope) => match key.code {
                KeyCode::Enter | KeyCode::Char('y') | KeyCode::Char('2') => {
                    effects.push(answer(PermissionAnswer::AllowAlways { scope: *scope }));
                    return;
                }
                KeyCode::Esc | KeyCode::Char('n') => {
                    prompt.stage = if scopes == 1 {
                        Stage::Choose(1)
                    } else {
                        Stage::Scope(*scope)
                    };
                }
                _ => {}
            },
            Stage::Reason(reason) => match key.code {
                KeyCode::Enter => {
                    let text = reason.take();
                    let reason = (!text.trim().is_empty()).then_some(text);
                    effects.push(answer(PermissionAnswer::Deny { reason }));
                    return;
                }
                KeyCode::Esc => prompt.stage = Stage::Choose(2),
                KeyCode::Backspace => reason.backspace(),
                KeyCode::Left => reason.left(),
                KeyCode::Right => reason.right(),
                KeyCode::Char(ch) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                    reason.insert(&ch.to_string());
                }
                _ => {}
            },
        }
        self.popup = Some(Popup::Permission(prompt));
    }

    /// A key on an MCP server's question: it stays until answered or dismissed.
    fn question_key(
        &mut self,
        mut prompt: crate::question::QuestionPrompt,
        key: KeyEvent,
        effects: &mut Vec<Effect>,
    ) {
        if prompt.sent && key.code != KeyCode::Esc {
            // Answered: it waits for the runtime's word (Esc still dismisses it).
            self.popup = Some(Popup::Question(prompt));
            return;
        }
        let outcome = prompt.key(key);
        let Some(session_id) = self.session_id() else {
            return;
        };
        let question_id = prompt.question.id.clone();
        let server = prompt.question.server.clone();
        let what = match &prompt.question.ask {
            keel_protocol::Ask::Form(_) => "form",
            keel_protocol::Ask::Url { .. } => "page",
        };
        // It stays until the question ends, so an answer the runtime refuses can be fixed.
        self.popup = Some(Popup::Question(prompt));
        let crate::question::Outcome::Answer(answer) = outcome else {
            return;
        };
        self.notice(
            Tone::Info,
            format!(
                "you {} {}'s {what}",
                answer.word(),
                crate::visible::visible(&server)
            ),
        );
        effects.push(Effect::Call(
            Tag::Question(question_id.clone()),
            Op::AnswerQuestion(ops::AnswerQuestion {
                session_id,
                question_id,
                answer,
            }),
        ));
    }

    pub(super) fn set_mode(&mut self, mode: PermissionMode, effects: &mut Vec<Effect>) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        effects.push(Effect::Call(
            Tag::Plain("cannot change the permission mode"),
            Op::UpdateSession(ops::UpdateSession {
                session_id,
                title: None,
                model: None,
                mode: Some(mode),
                thinking: None,
            }),
        ));
        // Shown at once; the session's update event confirms it.
        self.info.mode = mode;
    }
}

/// The first line of a text, for notices.
pub fn first_line(text: &str) -> String {
    crate::wrap::truncate(text.lines().next().unwrap_or_default(), 60)
}
