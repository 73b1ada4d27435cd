//! The daemon connection: hello, heartbeats, the jittered reconnect
//! (0.5 s doubling to at most 10 s, the failure's words kept up meanwhile;
//! none after 4001/4002, where only the keepalive alarm tries), and what the
//! options page and popup say of it.

use super::*;

impl Background {
    pub(super) fn set_connection(self: &Rc<Self>, text: &str) {
        *self.connection.borrow_mut() = text.into();
        let bg = self.clone();
        wasm_bindgen_futures::spawn_local(async move { bg.publish_status().await });
    }

    pub(super) fn connect(self: &Rc<Self>) {
        if self.socket.borrow().is_some() {
            return;
        }
        let Some(pairing) = self.pairing.borrow().clone() else {
            self.set_connection("not paired: set the endpoint and token in the options page");
            return;
        };
        // Checked again right before connecting: storage may hold anything.
        let endpoint_ok =
            crate::web::url_parts(&pairing.endpoint).is_some_and(|p| crate::pairing::check_endpoint(&p).is_ok());
        let Some(id) = crate::pairing::credential_executor_id(&pairing.token).filter(|_| endpoint_ok) else {
            self.set_connection("not paired: the saved endpoint or credential is not acceptable; pair again");
            return;
        };
        *self.executor_id.borrow_mut() = id.to_owned();
        let socket = match WebSocket::new(&pairing.endpoint) {
            Ok(socket) => socket,
            Err(_) => {
                self.set_connection("the endpoint is not a WebSocket URL");
                return;
            }
        };
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        if !self.retrying.get() {
            self.set_connection("connecting");
        }
        let current = {
            let bg = self.clone();
            move || bg.generation.get() == generation
        };
        let (bg, live) = (self.clone(), current.clone());
        let on_open = Closure::<dyn FnMut()>::new(move || {
            if live() {
                bg.send(&executor_core::hello(&Identity {
                    token: pairing.token.clone(),
                    executor_id: bg.executor_id.borrow().clone(),
                    instance_id: bg.instance_id.clone(),
                    kind: ExecutorKind::Webext,
                    capabilities: vec![
                        protocol::executor::OPERATOR_CAPABILITY.into(),
                        protocol::executor::PARK.into(),
                        protocol::executor::ROLLOVER.into(),
                        protocol::executor::MODEL.into(),
                        protocol::executor::EFFORT.into(),
                        protocol::executor::PAGE_INSPECT.into(),
                    ],
                    host: MachineFacts { os: bg.os.into(), browser: user_agent(), ..MachineFacts::default() },
                }));
            }
        });
        let (bg, live) = (self.clone(), current.clone());
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            if let (true, Some(text)) = (live(), event.data().as_string()) {
                bg.on_frame(&text);
            }
        });
        let (bg, live) = (self.clone(), current);
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |event: CloseEvent| {
            if live() {
                bg.on_closed(event.code(), &event.reason());
            }
        });
        socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        // The socket owns its handlers for its whole life; a reconnect makes a new socket.
        on_open.forget();
        on_message.forget();
        on_close.forget();
        *self.socket.borrow_mut() = Some(socket);
    }

    pub(super) fn disconnect(&self) {
        self.generation.set(self.generation.get() + 1);
        self.stop_heartbeat();
        if let Some(socket) = self.socket.borrow_mut().take() {
            let _ = socket.close();
        }
    }

    pub(super) fn on_closed(self: &Rc<Self>, code: u16, reason: &str) {
        self.socket.borrow_mut().take();
        forget_view();
        self.stop_heartbeat();
        // In words, with what to do (docs/executor-protocol.md, close reasons).
        let why = match code {
            4001 => format!("the daemon refused this pairing ({reason}): run `orchestrator pair` and pair again"),
            4002 => {
                format!("the daemon and this extension speak no common protocol version ({reason})")
            }
            _ if reason.is_empty() => {
                "the daemon is not reachable: is `orchestrator serve` running at the paired address?".to_owned()
            }
            _ => format!("disconnected: {reason}"),
        };
        // docs/executor-protocol.md, "Reconnecting": no quick retry can
        // succeed after these; the keepalive alarm still tries (a daemon updated).
        if matches!(code, 4001 | 4002) {
            self.retrying.set(true);
            self.set_connection(&why);
            return;
        }
        self.set_connection(&format!("{why} (trying again by itself)"));
        self.schedule_reconnect();
    }

    /// Reconnects after a jittered, doubling delay.
    pub(super) fn schedule_reconnect(self: &Rc<Self>) {
        self.retrying.set(true);
        if self.reconnect_pending.replace(true) {
            return;
        }
        let base = self.backoff_ms.get();
        self.backoff_ms.set((base * 2).min(BACKOFF_MAX_MS));
        let delay = (base / 2 + (js_sys::Math::random() * f64::from(base)) as u32).min(BACKOFF_MAX_MS);
        let bg = self.clone();
        let retry = Closure::once_into_js(move || {
            bg.reconnect_pending.set(false);
            bg.connect();
        });
        set_timeout(retry.unchecked_ref(), delay as i32);
    }

    pub(super) fn stop_heartbeat(&self) {
        if let Some(id) = self.heartbeat.take() {
            let clear: Function = Reflect::get(&js_sys::global(), &"clearInterval".into()).unwrap().unchecked_into();
            let _ = clear.call1(&JsValue::NULL, &id.into());
        }
    }

    pub(super) fn start_heartbeat(self: &Rc<Self>, every_ms: u64) {
        self.stop_heartbeat();
        let bg = self.clone();
        let beat = Closure::<dyn FnMut()>::new(move || {
            let seq = bg.heartbeat_seq.get() + 1;
            bg.heartbeat_seq.set(seq);
            bg.send(&ExecutorFrame::Heartbeat { seq });
        });
        let set: Function = Reflect::get(&js_sys::global(), &"setInterval".into()).unwrap().unchecked_into();
        let id = set.call2(&JsValue::NULL, beat.as_ref(), &(every_ms as f64).into()).ok().and_then(|v| v.as_f64());
        beat.forget();
        self.heartbeat.set(id.map(|v| v as i32));
    }

    pub(super) fn send(&self, frame: &ExecutorFrame) {
        if let Some(socket) = &*self.socket.borrow()
            && socket.ready_state() == WebSocket::OPEN
        {
            let _ = socket.send_with_str(&serde_json::to_string(frame).expect("frames serialize"));
        }
    }

    pub(super) fn emit(&self, frames: Vec<ExecutorFrame>) {
        for frame in &frames {
            self.send(frame);
        }
    }

    pub(super) fn disconnect_and_retry(self: &Rc<Self>, why: &str) {
        self.disconnect();
        self.set_connection(&format!("{why} (trying again by itself)"));
        self.schedule_reconnect();
    }
}
