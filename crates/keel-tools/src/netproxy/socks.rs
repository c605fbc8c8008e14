//! The proxy's SOCKS5 side (RFC 1928): no authentication, `CONNECT` only, to a name or an
//! address the rules allow.

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::{Proxy, relay};

/// The protocol version byte every SOCKS5 message starts with.
pub(super) const VERSION: u8 = 5;

const NO_AUTHENTICATION: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const CONNECT: u8 = 1;
const SUCCEEDED: u8 = 0;
const NOT_ALLOWED: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_NOT_SUPPORTED: u8 = 8;

pub(super) async fn serve(proxy: &Proxy, mut client: TcpStream) -> std::io::Result<()> {
    let asked = tokio::time::timeout(super::REQUEST_LIMIT, request(&mut client)).await;
    let Ok(asked) = asked else {
        return Ok(());
    };
    let (host, port) = match asked? {
        Asked::Connect(host, port) => (host, port),
        Asked::Refused(code) => return reply(&mut client, code).await,
        Asked::NoMethod => return Ok(()),
    };
    let mut upstream = match proxy.open(&host, port).await {
        None => return reply(&mut client, NOT_ALLOWED).await,
        Some(Err(_)) => return reply(&mut client, HOST_UNREACHABLE).await,
        Some(Ok(stream)) => stream,
    };
    reply(&mut client, SUCCEEDED).await?;
    relay(&mut client, &mut upstream).await
}

/// What the client asked for.
enum Asked {
    Connect(String, u16),
    /// Something this proxy does not do: the reply code.
    Refused(u8),
    /// No method this proxy offers (answered already).
    NoMethod,
}

/// The greeting and the request, up to the address.
async fn request(client: &mut TcpStream) -> std::io::Result<Asked> {
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).await?;
    let mut methods = vec![0u8; usize::from(greeting[1])];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&NO_AUTHENTICATION) {
        client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await?;
        return Ok(Asked::NoMethod);
    }
    client.write_all(&[VERSION, NO_AUTHENTICATION]).await?;
    let mut head = [0u8; 4];
    client.read_exact(&mut head).await?;
    let [_, command, _, kind] = head;
    let host = match kind {
        1 => {
            let mut ip = [0u8; 4];
            client.read_exact(&mut ip).await?;
            std::net::Ipv4Addr::from(ip).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len).await?;
            let mut name = vec![0u8; usize::from(len[0])];
            client.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut ip = [0u8; 16];
            client.read_exact(&mut ip).await?;
            std::net::Ipv6Addr::from(ip).to_string()
        }
        _ => return Ok(Asked::Refused(ADDRESS_NOT_SUPPORTED)),
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await?;
    if command != CONNECT {
        return Ok(Asked::Refused(COMMAND_NOT_SUPPORTED));
    }
    Ok(Asked::Connect(host, u16::from_be_bytes(port)))
}

/// A reply with an empty bound address.
async fn reply(client: &mut TcpStream, code: u8) -> std::io::Result<()> {
    client
        .write_all(&[VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
}
