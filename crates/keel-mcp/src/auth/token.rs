//! The token endpoint: codes, refresh tokens and client credentials become access tokens,
//! with the client authenticated the way the authorization server takes
//! (`client_secret_basic`, `client_secret_post`, `private_key_jwt` signed with ring, or
//! `none`), and the `resource` parameter of RFC 8707 in every request.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Deserialize;
use url::Url;

use super::AuthError;
use super::net::{Reach, form};

/// How keel proves who it is at the token endpoint.
#[derive(Clone)]
pub(crate) enum ClientAuth {
    /// A public client: its id in the body.
    None,
    /// HTTP Basic with the secret.
    Basic(String),
    /// The secret in the body.
    Post(String),
    /// A JWT signed with this PKCS#8 key, for this audience (the issuer).
    Jwt { key: SigningKey, audience: String },
}

impl ClientAuth {
    /// Its name in OAuth metadata.
    pub(crate) fn method(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Basic(_) => "client_secret_basic",
            Self::Post(_) => "client_secret_post",
            Self::Jwt { .. } => "private_key_jwt",
        }
    }
}

/// A private key that signs client assertions.
#[derive(Clone)]
pub(crate) enum SigningKey {
    /// P-256 (ES256).
    Es256(std::sync::Arc<ring::signature::EcdsaKeyPair>),
    /// RSA (RS256).
    Rs256(std::sync::Arc<ring::signature::RsaKeyPair>),
}

impl SigningKey {
    /// The key of a PEM file's text (PKCS#8 `PRIVATE KEY`).
    pub(crate) fn from_pem(pem: &str) -> Result<Self, String> {
        let body: String = pem
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("-----") && !l.is_empty())
            .collect();
        let der = STANDARD
            .decode(body)
            .map_err(|e| format!("not a PEM key: {e}"))?;
        let rng = ring::rand::SystemRandom::new();
        if let Ok(key) = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &der,
            &rng,
        ) {
            return Ok(Self::Es256(std::sync::Arc::new(key)));
        }
        ring::signature::RsaKeyPair::from_pkcs8(&der)
            .map(|key| Self::Rs256(std::sync::Arc::new(key)))
            .map_err(|_| "not a PKCS#8 P-256 or RSA private key".to_owned())
    }

    /// A signed client assertion (RFC 7523) for `client_id` to `audience`.
    fn assertion(&self, client_id: &str, audience: &str) -> Result<String, AuthError> {
        let rng = ring::rand::SystemRandom::new();
        let now = super::now();
        let alg = match self {
            Self::Es256(_) => "ES256",
            Self::Rs256(_) => "RS256",
        };
        let header = serde_json::json!({"alg": alg, "typ": "JWT"});
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "jti": super::random(16),
        });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let failed = |_| AuthError::Token("cannot sign the client assertion".into());
        let signature = match self {
            Self::Es256(key) => key
                .sign(&rng, input.as_bytes())
                .map_err(failed)?
                .as_ref()
                .to_vec(),
            Self::Rs256(key) => {
                let mut out = vec![0; key.public().modulus_len()];
                key.sign(
                    &ring::signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut out,
                )
                .map_err(failed)?;
                out
            }
        };
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

/// A token endpoint's answer.
#[derive(Clone, Deserialize)]
pub(crate) struct Tokens {
    /// The access token.
    pub(crate) access_token: String,
    /// Its type; only `Bearer` is used.
    #[serde(default)]
    pub(crate) token_type: Option<String>,
    /// Seconds it lives.
    #[serde(default)]
    pub(crate) expires_in: Option<u64>,
    /// A refresh token.
    #[serde(default)]
    pub(crate) refresh_token: Option<String>,
    /// The scopes granted, when they differ from those asked.
    #[serde(default)]
    pub(crate) scope: Option<String>,
}

impl std::fmt::Debug for Tokens {
    // The tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// One token request: `grant` parameters plus the client's proof, to `endpoint`.
pub(crate) async fn request(
    reach: &Reach,
    endpoint: &str,
    client_id: &str,
    auth: &ClientAuth,
    grant: &[(&str, &str)],
) -> Result<Tokens, AuthError> {
    let url = Url::parse(endpoint).map_err(|e| AuthError::Malformed {
        url: endpoint.to_owned(),
        reason: e.to_string(),
    })?;
    let mut pairs: Vec<(&str, &str)> = grant.to_vec();
    let mut headers = Vec::new();
    let assertion;
    match auth {
        ClientAuth::None => pairs.push(("client_id", client_id)),
        ClientAuth::Basic(secret) => {
            // RFC 6749 §2.3.1: both parts form-encoded before Basic.
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", encode(client_id), encode(secret));
            headers.push(("authorization", format!("Basic {}", STANDARD.encode(pair))));
        }
        ClientAuth::Post(secret) => {
            pairs.push(("client_id", client_id));
            pairs.push(("client_secret", secret));
        }
        ClientAuth::Jwt { key, audience } => {
            assertion = key.assertion(client_id, audience)?;
            pairs.push(("client_id", client_id));
            pairs.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ));
            pairs.push(("client_assertion", &assertion));
        }
    }
    let (status, answer) = reach
        .post(
            &url,
            "application/x-www-form-urlencoded",
            form(&pairs),
            &headers,
        )
        .await?;
    if !status.is_success() {
        let error = answer["error"].as_str().unwrap_or("no error code");
        let description = answer["error_description"].as_str().unwrap_or_default();
        return Err(AuthError::Token(format!(
            "the token endpoint answered {status}: {error}{}{description}",
            if description.is_empty() { "" } else { ": " }
        )));
    }
    let tokens: Tokens = serde_json::from_value(answer).map_err(|e| AuthError::Malformed {
        url: endpoint.to_owned(),
        reason: format!("not a token answer: {e}"),
    })?;
    if let Some(kind) = &tokens.token_type
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(AuthError::Token(format!(
            "the token endpoint issued a `{kind}` token; keel sends bearer tokens only"
        )));
    }
    if tokens.access_token.is_empty() {
        return Err(AuthError::Token(
            "the token endpoint issued an empty token".into(),
        ));
    }
    let too_long = |t: &Option<String>, limit: usize| t.as_ref().is_some_and(|t| t.len() > limit);
    if tokens.access_token.len() > super::MAX_SECRET
        || too_long(&tokens.refresh_token, super::MAX_SECRET)
        || too_long(&tokens.scope, 4096)
    {
        return Err(AuthError::Token(format!(
            "the token endpoint issued a token or scope longer than keel keeps ({} KiB)",
            super::MAX_SECRET / 1024
        )));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_p256_key_signs_an_assertion_that_verifies() {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(pkcs8.as_ref())
        );
        let key = SigningKey::from_pem(&pem).unwrap();
        let jwt = key.assertion("client", "https://as.example.com").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client");
        assert_eq!(claims["sub"], "client");
        assert_eq!(claims["aud"], "https://as.example.com");
        let SigningKey::Es256(pair) = &key else {
            panic!("a P-256 key")
        };
        use ring::signature::KeyPair as _;
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            pair.public_key().as_ref(),
        );
        public
            .verify(
                format!("{}.{}", parts[0], parts[1]).as_bytes(),
                &URL_SAFE_NO_PAD.decode(parts[2]).unwrap(),
            )
            .unwrap();
        assert!(SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END").is_err());
    }
}
