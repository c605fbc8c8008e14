//! The loopback redirect a browser login comes back to: a listener on 127.0.0.1 that takes
//! one `GET /callback?code=…&state=…` whose `state` is the one sent, refuses any other
//! request, and gives up after a time limit.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::AuthError;

/// The path the redirect comes back to.
const PATH: &str = "/callback";
/// The most of a request read.
const REQUEST_LIMIT: usize = 16 * 1024;

/// A listener waiting for the redirect.
pub(crate) struct Redirect {
    listener: TcpListener,
    /// `http://127.0.0.1:PORT/callback`.
    pub(crate) uri: String,
}

impl Redirect {
    /// Listens on `port` of 127.0.0.1 (0: any free one).
    pub(crate) async fn listen(port: u16) -> Result<Self, AuthError> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| AuthError::Redirect(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| AuthError::Redirect(e.to_string()))?
            .port();
        Ok(Self {
            listener,
            uri: format!("http://127.0.0.1:{port}{PATH}"),
        })
    }

    /// The code of the first redirect carrying `state`, within `limit`. Each connection is
    /// answered on its own, so one that sends nothing cannot hold up the browser's.
    pub(crate) async fn code(&self, state: &str, limit: Duration) -> Result<String, AuthError> {
        let deadline = tokio::time::Instant::now() + limit;
        let (done, mut results) = tokio::sync::mpsc::channel(1);
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    return Err(AuthError::Redirect(format!(
                        "no login came back within {} minutes",
                        limit.as_secs() / 60
                    )));
                }
                Some(result) = results.recv() => return result,
                accepted = self.listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let state = state.to_owned();
                    let done = done.clone();
                    tokio::spawn(async move {
                        let answered =
                            tokio::time::timeout(Duration::from_secs(10), answer(stream, &state)).await;
                        if let Ok(Some(result)) = answered {
                            let _ = done.send(result).await;
                        }
                    });
                }
            }
        }
    }
}

/// Reads one request and answers it: `Some` ends the wait (a code, or the authorization
/// server's refusal), `None` keeps waiting (a stray request, a wrong `state`).
async fn answer(mut stream: TcpStream, state: &str) -> Option<Result<String, AuthError>> {
    let mut request = Vec::new();
    let mut buffer = [0u8; 2048];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 || request.len() + read > REQUEST_LIMIT {
            return None;
        }
        request.extend_from_slice(&buffer[..read]);
    }
    let text = String::from_utf8_lossy(&request);
    let line = text.lines().next().unwrap_or_default();
    let mut words = line.split(' ');
    let (Some("GET"), Some(target)) = (words.next(), words.next()) else {
        respond(
            &mut stream,
            "405 Method Not Allowed",
            "keel expects the login's redirect here.",
        )
        .await;
        return None;
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != PATH {
        respond(&mut stream, "404 Not Found", "Not the login's redirect.").await;
        return None;
    }
    let mut code = None;
    let mut got_state = None;
    let mut error = None;
    let mut description = None;
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "code" => code = Some(value.into_owned()),
            "state" => got_state = Some(value.into_owned()),
            "error" => error = Some(value.into_owned()),
            "error_description" => description = Some(value.into_owned()),
            _ => {}
        }
    }
    // A redirect without this login's state is someone else's (or forged): refused, and the
    // login goes on waiting for its own.
    if got_state.as_deref() != Some(state) {
        respond(
            &mut stream,
            "400 Bad Request",
            "This redirect does not belong to the login keel started; it was refused.",
        )
        .await;
        return None;
    }
    if let Some(error) = error {
        respond(
            &mut stream,
            "200 OK",
            "The login was refused. You can close this tab.",
        )
        .await;
        return Some(Err(AuthError::Redirect(format!(
            "the authorization server refused: {error}{}",
            description.map(|d| format!(": {d}")).unwrap_or_default()
        ))));
    }
    match code {
        Some(code) if !code.is_empty() => {
            respond(
                &mut stream,
                "200 OK",
                "keel is logged in. You can close this tab.",
            )
            .await;
            Some(Ok(code))
        }
        _ => {
            respond(
                &mut stream,
                "400 Bad Request",
                "The redirect carries no code.",
            )
            .await;
            None
        }
    }
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>keel</title><p style=\"font-family:sans-serif\">{text}</p>"
    );
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    async fn get(uri: &str) -> String {
        let rest = uri.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let mut stream = TcpStream::connect(host).await.unwrap();
        stream
            .write_all(format!("GET /{path} HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn only_the_redirect_with_this_state_gives_the_code() {
        let redirect = Redirect::listen(0).await.unwrap();
        let uri = redirect.uri.clone();
        let waiting =
            tokio::spawn(async move { redirect.code("s1", Duration::from_secs(20)).await });
        assert!(
            get(&format!("{uri}?code=stolen&state=other"))
                .await
                .starts_with("HTTP/1.1 400")
        );
        assert!(
            get(&format!("{uri}?code=stolen"))
                .await
                .starts_with("HTTP/1.1 400")
        );
        let elsewhere = uri.replace("/callback", "/other");
        assert!(
            get(&format!("{elsewhere}?code=x&state=s1"))
                .await
                .starts_with("HTTP/1.1 404")
        );
        assert!(
            get(&format!("{uri}?code=right&state=s1"))
                .await
                .starts_with("HTTP/1.1 200")
        );
        assert_eq!(waiting.await.unwrap().unwrap(), "right");
    }

    #[tokio::test]
    async fn a_refusal_and_the_time_limit_end_the_wait() {
        let redirect = Redirect::listen(0).await.unwrap();
        let uri = redirect.uri.clone();
        let waiting =
            tokio::spawn(async move { redirect.code("s", Duration::from_secs(20)).await });
        get(&format!(
            "{uri}?error=access_denied&error_description=no&state=s"
        ))
        .await;
        let error = waiting.await.unwrap().unwrap_err();
        assert!(error.to_string().contains("access_denied"), "{error}");
        let redirect = Redirect::listen(0).await.unwrap();
        let error = redirect
            .code("s", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("no login came back"), "{error}");
    }
}
