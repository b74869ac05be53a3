//! `zodex sprite watch --tui`: the board in the terminal, for operators who only have SSH.
//! The same feed as the page (`model` turns its events into what is shown, every agent text
//! cleaned of control characters); the same actions, the operator's own admin requests.
//!
//! Keys: ↑/↓ choose a request, `t` the TTL, `a` approve, `d` deny, `r` revoke the first
//! grant's repository, `f` denials only, `q` quit.

pub mod model;

use super::actions::{Action, forward};
use super::feed::Feed;
use crate::registry::SpriteEntry;
use model::Model;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, List, ListItem, Paragraph, Wrap};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error("the terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error(
        "--tui draws the board in a terminal, and this one has none (stdin or stdout is not a terminal): run it in a terminal, or leave out --tui to open the board as a page"
    )]
    NoTerminal,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Runs the terminal view until `q` (local mode: tool calls only, no actions).
pub fn run(source: super::Source) -> Result<(), TuiError> {
    use std::io::IsTerminal as _;
    // Checked before anything starts: without a terminal the screen cannot be drawn.
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(TuiError::NoTerminal);
    }
    let feed = Feed::new();
    let follow = feed.clone();
    let sprite = match source {
        super::Source::Sprite(sprite) => {
            let entry = sprite.clone();
            std::thread::spawn(move || super::feed::follow_sprite(follow, entry));
            Some(sprite)
        }
        super::Source::Local { history } => {
            std::thread::spawn(move || super::feed::follow_history(follow, history));
            None
        }
    };
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(&mut terminal, &feed, sprite.as_ref());
    ratatui::restore();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    feed: &Arc<Feed>,
    sprite: Option<&SpriteEntry>,
) -> Result<(), TuiError> {
    let (backlog, mut live) = feed.subscribe(None);
    let mut model = Model {
        feed: "connecting".into(),
        ..Model::default()
    };
    for event in backlog {
        take(&mut model, &event.json);
    }
    loop {
        while let Ok(event) = live.try_recv() {
            take(&mut model, &event.json);
        }
        terminal.draw(|frame| draw(frame, &model))?;
        if !event::poll(Duration::from_millis(200))? {
            continue;
        }
        if let Event::Key(key) = event::read()?
            && key.kind == KeyEventKind::Press
            && !press(&mut model, key.code, sprite)
        {
            return Ok(());
        }
    }
}

fn take(model: &mut Model, json: &str) {
    if let Ok(value) = serde_json::from_str(json) {
        model.take(&value, now());
    }
}

/// One key; false to quit.
fn press(model: &mut Model, key: KeyCode, sprite: Option<&SpriteEntry>) -> bool {
    let selected = model.requests.get(model.selected).cloned();
    match key {
        KeyCode::Char('q') | KeyCode::Esc => return false,
        KeyCode::Up => {
            model.selected = model.selected.saturating_sub(1);
            model.ttl_choice = None;
        }
        KeyCode::Down => {
            model.selected = (model.selected + 1).min(model.requests.len().saturating_sub(1));
            model.ttl_choice = None;
        }
        KeyCode::Char('t') => {
            let (choices, index) = model.ttl_choices();
            model.ttl_choice = Some((index + 1) % choices.len());
        }
        KeyCode::Char('f') => model.only_denials = !model.only_denials,
        KeyCode::Char('a') if selected.is_some() => {
            let (choices, index) = model.ttl_choices();
            let request = selected.unwrap_or_else(|| unreachable!());
            let ttl = choices[index];
            act(
                model,
                sprite,
                Action::Approve {
                    id: request.id,
                    ttl_seconds: ttl,
                },
                || format!("approved #{} for {}", request.id, duration(ttl)),
            );
        }
        KeyCode::Char('d') if selected.is_some() => {
            let request = selected.unwrap_or_else(|| unreachable!());
            act(model, sprite, Action::Deny { id: request.id }, || {
                format!("denied #{}", request.id)
            });
        }
        KeyCode::Char('r') => {
            if let Some(repo) = model.authority.iter().find_map(|a| a.repo.clone()) {
                let done = format!("revoked push to {repo}");
                act(model, sprite, Action::RevokePush { repo }, || done);
            }
        }
        _ => {}
    }
    true
}

fn act(
    model: &mut Model,
    sprite: Option<&SpriteEntry>,
    action: Action,
    done: impl FnOnce() -> String,
) {
    let Some(sprite) = sprite else {
        model.message = "local mode has no publisher: nothing to approve here".into();
        return;
    };
    let answer = forward(sprite, action);
    model.message = if answer.ok {
        done()
    } else {
        model::clean(
            &answer
                .error
                .map(|e| e.message)
                .unwrap_or_else(|| "refused".into()),
        )
    };
}

pub fn duration(seconds: i64) -> String {
    let (h, m, s) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s:02}s"),
        (h, m) => format!("{h}h{m:02}m"),
    }
}

fn draw(frame: &mut Frame, model: &Model) {
    let [head, top, middle, bottom, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(30),
        Constraint::Percentage(35),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let [requests, authority] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Fill(1)]).areas(top);
    frame.render_widget(
        Paragraph::new(format!(
            "Zodex board — feed: {} — proofs: {}",
            model.feed, model.proofs
        ))
        .style(Style::new().add_modifier(Modifier::BOLD)),
        head,
    );
    frame.render_widget(requests_list(model), requests);
    let now = now();
    let items: Vec<ListItem> = model
        .authority
        .iter()
        .map(|a| {
            let left = a.ends_at.map_or("no TTL".to_string(), |end| {
                duration((end - now).max(0)) + " left"
            });
            ListItem::new(format!("{} — {left}", a.label))
        })
        .collect();
    frame.render_widget(
        List::new(items).block(Block::bordered().title("Authority now (r: revoke)")),
        authority,
    );
    let decisions: Vec<ListItem> = model
        .decisions
        .iter()
        .filter(|d| !model.only_denials || d.deny)
        .take(middle.height as usize)
        .map(|d| {
            let style = if d.deny {
                Style::new().fg(Color::Red)
            } else {
                Style::new()
            };
            ListItem::new(Span::styled(d.line.clone(), style))
        })
        .collect();
    let title = if model.only_denials {
        "Decisions — denials only (f: all)"
    } else {
        "Decisions (f: denials only)"
    };
    frame.render_widget(
        List::new(decisions).block(Block::bordered().title(title)),
        middle,
    );
    let calls: Vec<ListItem> = model
        .calls
        .iter()
        .take(bottom.height as usize)
        .map(|c| {
            ListItem::new(vec![
                Line::from(format!("[{}] {}", c.conversation, c.line)),
                Line::from(Span::styled(
                    format!("    {}", c.output),
                    Style::new().fg(Color::DarkGray),
                )),
            ])
        })
        .collect();
    frame.render_widget(
        List::new(calls).block(Block::bordered().title("What the model runs")),
        bottom,
    );
    frame.render_widget(Paragraph::new(model.message.clone()), foot);
}

fn requests_list(model: &Model) -> Paragraph<'static> {
    let mut lines = Vec::new();
    let (choices, index) = model.ttl_choices();
    for (i, r) in model.requests.iter().enumerate() {
        let chosen = i == model.selected;
        let marker = if chosen { "▶ " } else { "  " };
        let asked = r.ttl_seconds.map_or("no TTL".to_string(), duration);
        lines.push(Line::from(Span::styled(
            format!(
                "{marker}#{} {}{} asks {asked}, {}{}",
                r.id,
                r.repo,
                if r.sprite.is_empty() {
                    String::new()
                } else {
                    format!(" (sprite {})", r.sprite)
                },
                r.refs,
                if r.workflows { ", workflows" } else { "" }
            ),
            if chosen {
                Style::new().add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            },
        )));
        lines.push(Line::from(format!("    “{}”", r.reason)));
        if chosen {
            lines.push(Line::from(format!(
                "    a: approve for {} (t: change) — d: deny",
                duration(choices[index])
            )));
        }
    }
    if lines.is_empty() {
        lines.push(Line::from("No requests waiting."));
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(Block::bordered().title(format!("Requests waiting ({})", model.requests.len())))
}
