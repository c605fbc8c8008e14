//! The proxy's HTTP side: `CONNECT host:port` opens a tunnel; a plain request in absolute
//! form (`GET http://host/path`) is sent on to its host in origin form, one request per
//! connection.

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::{Proxy, relay};

/// The most a request's head may hold.
const MAX_HEAD: usize = 64 * 1024;

pub(super) async fn serve(proxy: &Proxy, mut client: TcpStream) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let end = loop {
        if let Some(end) = find_end(&buf) {
            break end;
        }
        if buf.len() >= MAX_HEAD {
            return answer(&mut client, "431 Request Header Fields Too Large", "").await;
        }
        let mut chunk = [0u8; 4096];
        let Ok(read) = tokio::time::timeout(super::REQUEST_LIMIT, client.read(&mut chunk)).await
        else {
            return answer(&mut client, "408 Request Timeout", "").await;
        };
        let n = read?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let (head, rest) = buf.split_at(end);
    let head = String::from_utf8_lossy(head).into_owned();
    let mut lines = head.split("\r\n");
    let request = lines.next().unwrap_or_default();
    let mut parts = request.split(' ');
    let (method, target, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or("HTTP/1.1"),
    );
    // Where to connect, what the client hears once connected, what goes upstream first.
    let (host, port, established, first): (String, u16, &[u8], Vec<u8>) =
        if method.eq_ignore_ascii_case("CONNECT") {
            let Some((host, port)) = split_host_port(target, None) else {
                return answer(
                    &mut client,
                    "400 Bad Request",
                    "keel: CONNECT needs host:port\n",
                )
                .await;
            };
            let established: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";
            (host, port, established, rest.to_vec())
        } else {
            let Some(after) = target.strip_prefix("http://") else {
                return answer(
                    &mut client,
                    "400 Bad Request",
                    "keel: this proxy takes CONNECT, or plain http:// requests in absolute form\n",
                )
                .await;
            };
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            let Some((host, port)) = split_host_port(authority, Some(80)) else {
                return answer(
                    &mut client,
                    "400 Bad Request",
                    "keel: no host in the request\n",
                )
                .await;
            };
            let path = if path.is_empty() { "/" } else { path };
            let mut first = origin_form(method, path, version, lines).into_bytes();
            first.extend_from_slice(rest);
            (host, port, &[], first)
        };
    let mut upstream = match proxy.open(&host, port).await {
        None => return refused(&mut client, &host).await,
        Some(Err(error)) => return unreachable(&mut client, &host, &error).await,
        Some(Ok(stream)) => stream,
    };
    client.write_all(established).await?;
    upstream.write_all(&first).await?;
    relay(&mut client, &mut upstream).await
}

/// A request in absolute form as its host wants it: the path alone, the proxy's headers
/// left out, and one request per connection (a second one on it could name another host).
fn origin_form<'a>(
    method: &str,
    path: &str,
    version: &str,
    headers: impl Iterator<Item = &'a str>,
) -> String {
    let mut out = format!("{method} {path} {version}\r\n");
    for line in headers.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        let hop = [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ];
        if hop.iter().any(|n| name.eq_ignore_ascii_case(n)) {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// Where the head ends (after its blank line).
fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// `host:port`, `[v6]:port`, or a bare host with `default` as its port.
fn split_host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default?,
        };
        (host.to_owned(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), port.parse().ok()?),
            None => (authority.to_owned(), default?),
        }
    };
    (!host.is_empty()).then_some((host, port))
}

async fn refused(client: &mut TcpStream, host: &str) -> std::io::Result<()> {
    let body = format!(
        "keel: the sandbox does not let commands reach {host}; the user can allow it in \
         sandbox.network.allow of keel's configuration\n"
    );
    answer(client, "403 Forbidden", &body).await
}

async fn unreachable(
    client: &mut TcpStream,
    host: &str,
    error: &std::io::Error,
) -> std::io::Result<()> {
    answer(
        client,
        "502 Bad Gateway",
        &format!("keel: cannot reach {host}: {error}\n"),
    )
    .await
}

async fn answer(client: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(reply.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(
            split_host_port("crates.io:443", None),
            Some(("crates.io".into(), 443))
        );
        assert_eq!(
            split_host_port("example.com", Some(80)),
            Some(("example.com".into(), 80))
        );
        assert_eq!(
            split_host_port("[::1]:8080", None),
            Some(("::1".into(), 8080))
        );
        assert_eq!(
            split_host_port("user:pw@host:81", None),
            Some(("host".into(), 81))
        );
        assert_eq!(split_host_port("example.com", None), None);
        assert_eq!(split_host_port(":443", None), None);
        assert_eq!(
            origin_form(
                "GET",
                "/x",
                "HTTP/1.1",
                [
                    "Host: a.example",
                    "Proxy-Connection: keep-alive",
                    "Connection: keep-alive",
                    "Accept: */*",
                    ""
                ]
                .into_iter(),
            ),
            "GET /x HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(split_host_port("host:notaport", None), None);
    }
}
