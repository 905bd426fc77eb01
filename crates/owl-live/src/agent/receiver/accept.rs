//! R's listening port: each connection's handshake and configuration check.

use super::*;

/// Accept connections on their own thread: handshake and configuration check, each connection
/// at once under [`crate::admission`]'s cap and deadline (idle or trickling connections cannot
/// hold the port), then hand each accepted link to the receiver. A refused peer gets one line
/// of reason, and so does the log.
pub(super) fn spawn_acceptor(
    listener: TcpListener,
    key: Key,
    name: String,
    cfg: AgentConfig,
    window: usize,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) -> Receiver<Link> {
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        crate::admission::serve(
            listener,
            crate::admission::Admission::default(),
            move |stream| admit(stream, &key, &name, &cfg, window),
            move |l| {
                // the receiver takes one link at a time; it is gone once the agent is done
                let _ = tx.send(l);
            },
            log,
        )
    });
    rx
}

fn admit(
    stream: TcpStream,
    key: &Key,
    name: &str,
    cfg: &AgentConfig,
    window: usize,
) -> Result<Link, AgentError> {
    stream.set_read_timeout(Some(link::HANDSHAKE_TIMEOUT))?;
    let mut l = link::accept(stream.try_clone()?, key, name)?;
    if l.hello.role != PeerRole::Sender {
        let e = format!(
            "this is a receiver agent; {} connected",
            l.hello.role.name()
        );
        l.writer.refuse(&e);
        return Err(AgentError::Protocol(e));
    }
    let f = l.reader.recv()?;
    let theirs = match Msg::decode(f.kind, &f.payload) {
        Ok(Msg::Config(c)) => c,
        Ok(m) => {
            return Err(AgentError::Protocol(format!(
                "expected config, got {}",
                m.name()
            )));
        }
        Err(e) => return Err(AgentError::Protocol(e.to_string())),
    };
    if let Err(e) = AgentConfig::check_pair(&theirs, cfg) {
        l.writer.refuse(&e);
        return Err(AgentError::Protocol(e));
    }
    send(
        &mut l.writer,
        &Msg::Accept {
            window: window.min(u32::MAX as usize) as u32,
        },
    )?;
    stream.set_read_timeout(None)?;
    Ok(l)
}
