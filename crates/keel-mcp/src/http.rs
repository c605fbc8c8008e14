//! An HTTP server's answers, bounded as a stdio server's are (`oversize`): rmcp's reqwest
//! client enforces the limits (16 MiB per SSE event or JSON body) but then ends the whole
//! stream, and the call only learns that the transport closed. This client is rmcp's own
//! with one change: an answer to a request that is over a limit becomes an error response
//! to that request, saying it was too large.

use std::collections::HashMap;
use std::sync::Arc;

use crate::auth::TokenSource;
use crate::oversize::too_large;
use futures::StreamExt as _;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

/// A stream of server-sent events, as rmcp's clients return them.
type Events = futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>;

/// rmcp's reqwest client, saying "too large" where it would close the stream, and sending
/// the OAuth token of the server's login when it has one ([`TokenSource`]): refreshed once
/// after a 401, a refusal kept for the front end.
#[derive(Clone)]
pub(crate) struct Bounded {
    pub(crate) client: reqwest::Client,
    pub(crate) auth: Option<Arc<TokenSource>>,
}

impl Bounded {
    /// The header to send: the login's token, else the configured one.
    async fn header(&self, configured: Option<String>) -> Option<String> {
        match &self.auth {
            Some(source) => source.bearer().await.or(configured),
            None => configured,
        }
    }

    /// After a refusal (`status`, its challenge): a renewed token to try once more (401
    /// only), the refusal kept.
    async fn after(&self, refused: Option<(u16, String)>, sent: Option<&str>) -> Option<String> {
        let source = self.auth.as_ref()?;
        let (status, challenge) = refused?;
        if status == 401
            && sent.is_some()
            && let Some(token) = source.renew(sent).await
        {
            return Some(token);
        }
        source.deny(status, &challenge);
        None
    }
}

/// The status and challenge of a 401 or 403. One without a `WWW-Authenticate` challenge
/// (which rmcp reports only as an unexpected `HTTP 401` answer) still counts, with none.
fn refusal<T>(answer: &Result<T, StreamableHttpError<reqwest::Error>>) -> Option<(u16, String)> {
    match answer {
        Err(StreamableHttpError::AuthRequired(error)) => {
            Some((401, error.www_authenticate_header.clone()))
        }
        Err(StreamableHttpError::InsufficientScope(error)) => {
            Some((403, error.www_authenticate_header.clone()))
        }
        Err(StreamableHttpError::UnexpectedServerResponse(message)) => {
            let status = message.strip_prefix("HTTP ")?.get(..4)?;
            match status {
                "401 " => Some((401, String::new())),
                "403 " => Some((403, String::new())),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether `error` is the event-size bound rmcp applies (its error type is private to rmcp,
/// so only its message tells).
fn over_the_bound(error: &SseError) -> bool {
    error.to_string().contains("exceeded the maximum size")
}

impl StreamableHttpClient for Bounded {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let id = match &message {
            ClientJsonRpcMessage::Request(request) => serde_json::to_value(&request.id).ok(),
            _ => None,
        };
        let header = self.header(auth_header).await;
        let mut answer = self
            .client
            .post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                header.clone(),
                custom_headers.clone(),
                limits,
            )
            .await;
        let refused = refusal(&answer);
        if let Some(renewed) = self.after(refused, header.as_deref()).await {
            answer = self
                .client
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    Some(renewed.clone()),
                    custom_headers,
                    limits,
                )
                .await;
            // Refused again with a fresh token: a login is needed, not another refresh.
            if let (Some(source), Some((status, challenge))) = (&self.auth, refusal(&answer)) {
                source.deny(status, &challenge);
            }
        }
        let Some(id) = id else {
            return answer;
        };
        match answer {
            Err(StreamableHttpError::ResponseBodyTooLarge { max_size }) => {
                let error: ServerJsonRpcMessage =
                    serde_json::from_value(too_large(&id, max_size, None)).map_err(|e| {
                        StreamableHttpError::UnexpectedServerResponse(e.to_string().into())
                    })?;
                Ok(StreamableHttpPostResponse::Json(error, None))
            }
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
                let max = limits.max_sse_event_size;
                let stream = stream
                    .map(move |event| match event {
                        Err(error) if over_the_bound(&error) => Ok(sse_stream::Sse {
                            event: Some("message".into()),
                            data: Some(too_large(&id, max, None).to_string()),
                            id: None,
                            retry: None,
                        }),
                        // rmcp's bounded stream ends after its error, and so after the
                        // stand-in.
                        other => other,
                    })
                    .boxed();
                Ok(StreamableHttpPostResponse::Sse(stream, session))
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let header = self.header(auth_header).await;
        self.client
            .delete_session(uri, session_id, header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let header = self.header(auth_header).await;
        self.client
            .get_stream(uri, session_id, last_event_id, header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let header = self.header(auth_header).await;
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_without_a_challenge_still_counts() {
        let unexpected = |text: &'static str| -> Result<(), StreamableHttpError<reqwest::Error>> {
            Err(StreamableHttpError::UnexpectedServerResponse(text.into()))
        };
        assert_eq!(
            refusal(&unexpected("HTTP 401 Unauthorized: token expired")),
            Some((401, String::new()))
        );
        assert_eq!(
            refusal(&unexpected("HTTP 403 Forbidden: no")),
            Some((403, String::new()))
        );
        assert_eq!(refusal(&unexpected("HTTP 404 Not Found: x")), None);
        assert_eq!(refusal(&unexpected("HTTP 4011")), None);
    }
}
