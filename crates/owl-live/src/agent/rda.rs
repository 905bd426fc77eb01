//! RDA's exchange between the two points over their connection (RDA §III-B's decoding with
//! feedback, [`owl_core::rda::session`]): R holds a [`Responder`] per (interval, method), S a
//! [`Decoder`]; R opens each exchange once the interval is decided, S answers each message
//! until it has decoded the interval, then sends its estimate as the method's result.

use super::*;

/// R opens method `i`'s exchange of interval `k` with its synopsis: the responder, once its
/// first message is sent to S; or why the exchange cannot start (the method's error).
pub(super) fn open(
    w: &mut LinkWriter,
    k: u64,
    i: u16,
    synopsis: Box<dyn PointSynopsis>,
) -> Result<Result<Responder<Box<RdaSynopsis>>, String>, AgentError> {
    let started = receiver_of::<RdaMethod>(synopsis)
        .map_err(|e| e.to_string())
        .and_then(|r| Responder::new(r).map_err(|e| e.to_string()));
    match started {
        Ok((resp, first)) => Ok(send_message(w, k, i, &first)?.map(|()| resp)),
        Err(e) => Ok(Err(e)),
    }
}

/// R answers S's `message` in method `i`'s exchange of interval `k`: the reply sent, or why
/// the exchange ends here (the method's error).
pub(super) fn answer(
    w: &mut LinkWriter,
    cfg: &owl_core::rda::Config,
    resp: &mut Responder<Box<RdaSynopsis>>,
    k: u64,
    i: u16,
    message: &[u8],
) -> Result<Result<(), String>, AgentError> {
    let answer = Message::decode(cfg, message)
        .map_err(|e| e.to_string())
        .and_then(|m| resp.on(m).map_err(|e| e.to_string()));
    match answer {
        Ok(a) => send_message(w, k, i, &a),
        Err(e) => Ok(Err(e)),
    }
}

/// Send `m` as method `i`'s next message in interval `k`'s exchange: `Ok(Err(..))` when it is
/// larger than a frame carries (the exchange ends with that error).
fn send_message(
    w: &mut LinkWriter,
    k: u64,
    i: u16,
    m: &Message,
) -> Result<Result<(), String>, AgentError> {
    let mut b = Vec::new();
    m.encode(&mut b);
    if b.len() > MAX_PAYLOAD {
        return Ok(Err(format!(
            "rda: the {} message of {} bytes exceeds the frame cap",
            m.name(),
            b.len()
        )));
    }
    send(
        w,
        &Msg::Rda {
            interval: k,
            method: i,
            message: b,
        },
    )?;
    Ok(Ok(()))
}

/// S's side: a decoder per exchange under way, and the exchanges that broke with a connection
/// (their synopsis went with the decoder) until R releases their interval.
#[derive(Default)]
pub(super) struct Decoders {
    under_way: HashMap<(u64, u16), Decoder<Box<RdaSynopsis>>>,
    broken: hashbrown::HashSet<(u64, u16)>,
}

impl Decoders {
    /// The connection broke: every exchange under way is lost. Returns how many.
    pub(super) fn break_all(&mut self) -> u64 {
        let n = self.under_way.len() as u64;
        self.broken
            .extend(self.under_way.drain().map(|(key, _)| key));
        n
    }

    /// R released every interval below `n`.
    pub(super) fn release_below(&mut self, n: u64) {
        self.under_way.retain(|(k, _), _| *k >= n);
        self.broken.retain(|(k, _)| *k >= n);
    }

    /// R's `message` in method `i`'s exchange of interval `k` (configuration `cfg`); R's first
    /// message starts S's decoder with `synopsis()` (S's synopsis of the interval, or an empty
    /// one). S answers with its next message, or with the estimate once decoded, or with the
    /// error that ends the exchange.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_message(
        &mut self,
        w: &mut LinkWriter,
        cfg: &owl_core::rda::Config,
        k: u64,
        i: u16,
        message: &[u8],
        synopsis: impl FnOnce() -> Box<dyn PointSynopsis>,
    ) -> Result<(), AgentError> {
        let result = (|| -> Result<Result<Message, Estimate>, String> {
            let msg = Message::decode(cfg, message).map_err(|e| e.to_string())?;
            if self.broken.contains(&(k, i)) {
                return Err(format!(
                    "rda: the exchange of interval {k} broke with the connection, and the sender's synopsis went with it"
                ));
            }
            if !self.under_way.contains_key(&(k, i)) {
                // R starts the exchange of k
                let syn = sender_of::<RdaMethod>(synopsis()).map_err(|e| e.to_string())?;
                let d = Decoder::new(syn).map_err(|e| e.to_string())?;
                self.under_way.insert((k, i), d);
            }
            let d = self.under_way.get_mut(&(k, i)).expect("inserted");
            match d.on(msg).map_err(|e| e.to_string())? {
                Step::Send(m) => Ok(Ok(m)),
                Step::Done(rec) => {
                    self.under_way.remove(&(k, i));
                    Ok(Err(rec.to_estimate(cfg)))
                }
            }
        })();
        // Ok(Ok(m)): answer R with m; Ok(Err(e)): the interval's estimate
        match result {
            Ok(Err(e)) => send_result(w, k, i, Ok(Box::new(e))),
            Ok(Ok(m)) => match send_message(w, k, i, &m)? {
                Ok(()) => Ok(()),
                Err(e) => {
                    self.under_way.remove(&(k, i));
                    send_result(w, k, i, Err(e))
                }
            },
            Err(e) => {
                self.under_way.remove(&(k, i));
                send_result(w, k, i, Err(e))
            }
        }
    }
}

/// S's result for method `i` of interval `k`: an estimate, or why there is none.
pub(super) fn send_result(
    w: &mut LinkWriter,
    k: u64,
    i: u16,
    result: Result<Box<Estimate>, String>,
) -> Result<(), AgentError> {
    send(
        w,
        &Msg::Result {
            interval: k,
            method: i,
            result,
        },
    )
}
