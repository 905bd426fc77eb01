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
    spawn_router(
        listener,
        key,
        name,
        vec![Route {
            config: cfg,
            window,
            links: tx,
        }],
        log,
    );
    rx
}

/// A receiver path a listening port serves: its configuration, its window, and where its
/// accepted links go.
pub struct Route {
    pub config: AgentConfig,
    pub window: usize,
    pub links: Sender<Link>,
}

/// [`spawn_acceptor`] for a point with several receiver paths on one port: each sender is
/// served the path its configuration names (a single route serves whatever comes, and the
/// configuration check names a path that differs).
pub fn spawn_router(
    listener: TcpListener,
    key: Key,
    name: String,
    routes: Vec<Route>,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) {
    let routes = Arc::new(routes);
    let admitted = routes.clone();
    std::thread::spawn(move || {
        crate::admission::serve(
            listener,
            crate::admission::Admission::default(),
            move |stream| admit(stream, &key, &name, &routes),
            move |(l, i): (Link, usize)| {
                // each path takes one link at a time; it is gone once the path is done
                let _ = admitted[i].links.send(l);
            },
            log,
        )
    });
}

fn admit(
    stream: TcpStream,
    key: &Key,
    name: &str,
    routes: &[Route],
) -> Result<(Link, usize), AgentError> {
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
    let i = match routes.iter().position(|r| r.config.path == theirs.path) {
        Some(i) => i,
        None if routes.len() == 1 => 0,
        None => {
            let names: Vec<&str> = routes.iter().map(|r| r.config.path.as_str()).collect();
            let e = format!(
                "this point ({name}) receives no path '{}': its receiver paths are {}",
                theirs.path,
                names.join(", ")
            );
            l.writer.refuse(&e);
            return Err(AgentError::Protocol(e));
        }
    };
    let Route { config, window, .. } = &routes[i];
    if let Err(e) = AgentConfig::check_pair(&theirs, config) {
        // a point's path: say which
        let e = if theirs.path.is_empty() || theirs.path != config.path {
            e
        } else {
            format!("path {}: {e}", theirs.path)
        };
        l.writer.refuse(&e);
        return Err(AgentError::Protocol(e));
    }
    send(
        &mut l.writer,
        &Msg::Accept {
            window: (*window).min(u32::MAX as usize) as u32,
        },
    )?;
    stream.set_read_timeout(None)?;
    Ok((l, i))
}
