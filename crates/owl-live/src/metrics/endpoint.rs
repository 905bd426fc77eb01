//! The `/metrics` endpoint. HTTP/1.1 is parsed and answered by `hyper`; the port is held by
//! [`crate::admission`]: each connection has a thread of its own under its cap, its deadline
//! ([`REQUEST_TIMEOUT`] for the whole exchange) and its per-source shedding, so idle or
//! trickling clients cannot hold the port. hyper runs on that thread in a single-threaded
//! tokio runtime, with its own header-read timeout; one request per connection.

use std::convert::Infallible;
use std::net::TcpStream;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use super::{MAX_REQUEST, Metrics, REQUEST_TIMEOUT};

/// The exposition's content type.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Answer one connection: `GET` (or `HEAD`) `/metrics` or `/` gets the OpenMetrics text,
/// another path 404, another method 405, a request head over [`MAX_REQUEST`] bytes 431 and a
/// malformed one 400 (hyper's). A connection closed without a request is not an error.
pub(super) fn answer(s: TcpStream, metrics: &Metrics) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("a runtime for a scrape: {e}"))?;
    let served = runtime.block_on(async {
        s.set_nonblocking(true)?;
        let io = TokioIo::new(tokio::net::TcpStream::from_std(s)?);
        let service = hyper::service::service_fn(|req: Request<Incoming>| {
            std::future::ready(Ok::<_, Infallible>(respond(&req, metrics)))
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(REQUEST_TIMEOUT)
            .keep_alive(false)
            .max_buf_size(MAX_REQUEST)
            .serve_connection(io, service);
        match tokio::time::timeout(REQUEST_TIMEOUT, conn).await {
            Ok(served) => Ok(served),
            Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
        }
    });
    match served {
        Ok(Ok(())) => Ok(()),
        // hyper answered a head it could not take (400, 431) and closed: said to the client
        Ok(Err(e)) if e.is_parse() || e.is_parse_too_large() => Ok(()),
        Ok(Err(e)) => Err(format!("answering a scrape: {e}")),
        Err(e) => Err(format!("answering a scrape: {e}")),
    }
}

fn respond(req: &Request<Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match (req.method(), req.uri().path()) {
        // hyper leaves the body out of a HEAD's answer, and keeps its length
        (&Method::GET | &Method::HEAD, "/metrics" | "/") => {
            (StatusCode::OK, OPENMETRICS, metrics.encode())
        }
        (&Method::GET | &Method::HEAD, _) => {
            (StatusCode::NOT_FOUND, "text/plain", "try /metrics\n".into())
        }
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".into(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;

    /// A metrics port on loopback, and a client that sends `req` and reads the whole answer.
    fn port() -> (impl Fn(&[u8]) -> String, Arc<Metrics>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let m = Arc::new(Metrics::new());
        let m2 = m.clone();
        std::thread::spawn(move || super::super::serve(l, m2, Arc::new(|_: &str| {})));
        let get = move |req: &[u8]| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(req).unwrap();
            if req.is_empty() {
                s.shutdown(std::net::Shutdown::Write).unwrap();
            }
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            String::from_utf8_lossy(&out).into_owned()
        };
        (get, m)
    }

    fn body(answer: &str) -> &str {
        answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
    }

    #[test]
    fn the_endpoint_answers_scrapes_and_refuses_the_rest() {
        let (get, m) = port();
        let ok = get(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(
            ok.contains("content-type: application/openmetrics-text"),
            "{ok}"
        );
        assert!(body(&ok).ends_with("# EOF\n"), "{ok}");
        assert!(body(&ok).contains("owl_connections_total"), "{ok}");
        // `/` too, with a query, in HTTP/1.0
        assert!(get(b"GET /?x=1 HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 200 OK"));
        // HEAD: the length, no body
        let head = get(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert_eq!(body(&head), "", "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(length.abs_diff(m.encode().len()) < 64, "{head}");
        assert!(get(b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        let big = format!(
            "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_REQUEST)
        );
        assert!(get(big.as_bytes()).starts_with("HTTP/1.1 431"));
        assert!(get(b"\x16\x03\x01\x02\x00garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        // a client that closes without a request gets nothing, and the port goes on
        assert_eq!(get(b""), "");
        assert!(get(b"GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
        let counts = m.admission("metrics");
        assert_eq!(counts.refused.get(), 0);
    }
}
