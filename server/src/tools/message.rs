//! Messages: `message_send`, `message_broadcast`.

use super::*;

/// `message_send` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageSendArgs {
    /// Your capability.
    pub capability: String,
    /// Recipient: a worker id, or a path such as `/root`. Workers may write to root only.
    pub to: String,
    /// Kind: question and blocker make you wait; answer and correction release a waiting recipient.
    pub kind: MessageKind,
    /// The message.
    pub body: String,
    /// The message (addressed to you) this one answers.
    #[serde(default)]
    #[schemars(with = "Option<MessageId>")]
    pub in_reply_to: Option<String>,
    /// Replaying the same key with the same arguments sends nothing new.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `message_send` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MessageSendOut {
    /// The message.
    pub message_id: MessageId,
    /// The recipient.
    pub to: WorkerId,
}

/// `message_broadcast` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBroadcastArgs {
    /// Root's capability.
    pub capability: String,
    /// Kind of message.
    pub kind: MessageKind,
    /// The message, sent to every unfinished worker.
    pub body: String,
    /// Replaying the same key with the same arguments sends nothing new.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `message_broadcast` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MessageBroadcastOut {
    /// One message per recipient (the same ids on an idempotent replay).
    pub message_ids: Vec<MessageId>,
}

#[tool_router(router = message_tools, vis = "pub(super)")]
impl Tools {
    /// Send a durable message. Workers write to root; root writes to any worker.
    #[tool(annotations(
        title = "Send message",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn message_send(
        &self,
        Parameters(args): Parameters<MessageSendArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MessageSendOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "message_send").await?;
        let tools = self.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let me = tools.plane.authenticate(&args.capability)?;
            let to = tools.recipient(&me.run_id, &args.to)?;
            let reply_to: Option<MessageId> = args.in_reply_to.as_deref().map(parse).transpose()?;
            let id = tools.plane.send(
                &me,
                &to,
                args.kind,
                &args.body,
                reply_to.as_ref(),
                args.idempotency_key.as_deref(),
            )?;
            Ok(MessageSendOut { message_id: id, to })
        })
        .await
    }

    /// Send one message to every unfinished worker. Root only.
    #[tool(annotations(
        title = "Broadcast message",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn message_broadcast(
        &self,
        Parameters(args): Parameters<MessageBroadcastArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MessageBroadcastOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "message_broadcast").await?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            let ids = plane.broadcast(&root, args.kind, &args.body, args.idempotency_key.as_deref())?;
            Ok(MessageBroadcastOut { message_ids: ids })
        })
        .await
    }
}
