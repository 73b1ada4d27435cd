//! Reading the run's log: `events_wait`, `events_list`.

use super::*;

/// A page size as asked: 1–500 events (default 100); over the bound is
/// `TOO_LARGE`, never silently cut.
fn page_limit(limit: Option<usize>) -> Result<usize, Error> {
    match limit.unwrap_or(DEFAULT_PAGE) {
        0 => Err(Error::InvalidArgument("limit is 1-500".into())),
        n if n > protocol::limits::EVENTS_PAGE_MAX => {
            Err(Error::TooLarge { field: "limit", len: n, max: protocol::limits::EVENTS_PAGE_MAX })
        }
        n => Ok(n),
    }
}

/// Which log to read.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Your run's (the default).
    #[default]
    Run,
    /// Your run's worktree ownership changes.
    Ownership,
}

impl Stream {
    /// The log, and what of it `me` may see: root its whole run, a worker
    /// its own events and mail; in the ownership log, the same of its run's
    /// records.
    fn of(self, me: &Worker) -> (RunId, Viewer) {
        match self {
            Stream::Run if me.is_root() => (me.run_id.clone(), Viewer::Root),
            Stream::Run => (me.run_id.clone(), Viewer::Worker(me.id.clone())),
            Stream::Ownership => {
                let worker = (!me.is_root()).then(|| me.id.clone());
                (RunId::ownership(), Viewer::Ownership(me.run_id.clone(), worker))
            }
        }
    }
}

/// `events_wait` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsWaitArgs {
    /// Your capability. Root sees the whole run; a worker sees its own events and its mail.
    pub capability: String,
    /// Return events after this cursor (0 for the beginning); pass back the `cursor` you got.
    pub after_cursor: u64,
    /// How long to wait for something new, in ms; at most 50000 (hosts time tool calls out at about 60 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Most events to return (1-500, default 100).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Which log: run (default) or ownership.
    #[serde(default)]
    pub stream: Stream,
}

/// `events_list` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsListArgs {
    /// Your capability. Root sees the whole run; a worker sees its own events and its mail.
    pub capability: String,
    /// Return events after this cursor (default 0, the beginning).
    #[serde(default)]
    pub after_cursor: u64,
    /// Most events to return (1-500, default 100).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Which log: run (default) or ownership.
    #[serde(default)]
    pub stream: Stream,
}

/// `events_wait` and `events_list` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventsOut {
    /// Pass this back as `after_cursor` to continue.
    pub cursor: u64,
    /// Events in cursor order.
    #[schemars(schema_with = "event_items")]
    pub events: Vec<Event>,
    /// True when a wait ended at its bound with nothing new.
    pub timed_out: bool,
}

/// The events' schema in brief: the envelope, and the kind's fields under
/// `data` (every kind with its fields: SPEC §4). The full union of ~40
/// kinds was 28 KB in each of the two events tools.
fn event_items(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "description": "An event: its position in the run's log, the run, the time, its kind (`type`, e.g. worker.progress) and that kind's fields (`data`).",
            "properties": {
                "cursor": { "type": "integer", "minimum": 1 },
                "run_id": { "type": "string" },
                "at_ms": { "type": "integer", "minimum": 0 },
                "type": { "type": "string" },
                "data": { "type": "object" }
            },
            "required": ["cursor", "run_id", "at_ms", "type"]
        }
    })
}

impl From<Page> for EventsOut {
    fn from(p: Page) -> Self {
        Self { cursor: p.cursor, events: p.events, timed_out: p.timed_out }
    }
}

const DEFAULT_PAGE: usize = 100;

const DEFAULT_WAIT_MS: u64 = 25_000;

#[tool_router(router = events_tools, vis = "pub(super)")]
impl Tools {
    /// Wait (bounded, at most 50 s) for events after a cursor. Returns {cursor, events, timed_out}.
    #[tool(annotations(
        title = "Wait for events",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn events_wait(&self, Parameters(args): Parameters<EventsWaitArgs>) -> Result<Json<EventsOut>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let me = match self.plane.authenticate(&args.capability) {
            Ok(me) => me,
            Err(e) => return Err(e.into()),
        };
        let (log, viewer) = args.stream.of(&me);
        let timeout_ms = args.timeout_ms.unwrap_or(DEFAULT_WAIT_MS);
        if timeout_ms > WAIT_MAX_MS {
            let e = Error::TooLarge { field: "timeout_ms", len: timeout_ms as usize, max: WAIT_MAX_MS as usize };
            return Err(e.into());
        }
        let limit = match page_limit(args.limit) {
            Ok(limit) => limit,
            Err(e) => return Err(e.into()),
        };
        match self.plane.wait(&log, args.after_cursor, Duration::from_millis(timeout_ms), limit, &viewer).await {
            Ok(page) => Ok(Json(page.into())),
            Err(e) => Err(e.into()),
        }
    }

    /// List events after a cursor without waiting.
    #[tool(annotations(
        title = "List events",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn events_list(&self, Parameters(args): Parameters<EventsListArgs>) -> Result<Json<EventsOut>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let me = plane.authenticate(&args.capability)?;
            let (log, viewer) = args.stream.of(&me);
            Ok(plane.events(&log, args.after_cursor, page_limit(args.limit)?, &viewer)?.into())
        })
        .await
    }
}
