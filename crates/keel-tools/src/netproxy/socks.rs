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
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).await?;
    let mut methods = vec![0u8; usize::from(greeting[1])];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&NO_AUTHENTICATION) {
        return client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await;
    }
    client.write_all(&[VERSION, NO_AUTHENTICATION]).await?;
    let mut request = [0u8; 4];
    client.read_exact(&mut request).await?;
    let [_, command, _, kind] = request;
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
        _ => return reply(&mut client, ADDRESS_NOT_SUPPORTED).await,
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await?;
    let port = u16::from_be_bytes(port);
    if command != CONNECT {
        return reply(&mut client, COMMAND_NOT_SUPPORTED).await;
    }
    let mut upstream = match proxy.open(&host, port).await {
        None => return reply(&mut client, NOT_ALLOWED).await,
        Some(Err(_)) => return reply(&mut client, HOST_UNREACHABLE).await,
        Some(Ok(stream)) => stream,
    };
    reply(&mut client, SUCCEEDED).await?;
    relay(&mut client, &mut upstream).await
}

/// A reply with an empty bound address.
async fn reply(client: &mut TcpStream, code: u8) -> std::io::Result<()> {
    client
        .write_all(&[VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
}
