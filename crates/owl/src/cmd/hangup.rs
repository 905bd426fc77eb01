//! SIGHUP: owl reloads nothing, and a hangup does not end it. By default a hangup (`kill -HUP`,
//! a reload by habit) ends a process at once, losing the interval under way and saying nothing
//! to the peer; an agent and the collector log it instead, with what to do, and go on.

/// On every SIGHUP, log `said()` and go on. Where the signal cannot be caught, say so once.
pub(super) fn go_on_after_hangup(said: impl Fn() -> String + Send + 'static, log: fn(&str)) {
    #[cfg(unix)]
    match signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP]) {
        Ok(mut signals) => {
            let spawned = std::thread::Builder::new()
                .name("owl-hangup".into())
                .spawn(move || {
                    for _ in signals.forever() {
                        log(&said());
                    }
                });
            if let Err(e) = spawned {
                log(&format!(
                    "no thread to catch SIGHUP ({e}): a hangup ends this process"
                ));
            }
        }
        Err(e) => log(&format!(
            "cannot catch SIGHUP ({e}): a hangup ends this process"
        )),
    }
    #[cfg(not(unix))]
    let _ = (said, log);
}
