//! The redaction corpus: every secret shape the attack round found surviving an export,
//! and look-alikes that must come through unchanged. Shared by the unit tests here and the
//! end-to-end rows (`keel sessions export`) in `keel-cli`'s tests.

/// Lines holding a secret, with the secret itself.
pub const SECRETS: &[(&str, &str)] = &[
    (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCY9q3Zt7vW2eXa",
        "wJalrXUtnFEMIK7MDENGbPxRfiCY9q3Zt7vW2eXa",
    ),
    (
        "aws_secret_access_key = Zt7vW2eXa/K7MDENG+bPxRfiCYwJalrXUtnFEMI9q3",
        "Zt7vW2eXa/K7MDENG+bPxRfiCYwJalrXUtnFEMI9q3",
    ),
    (
        "export OPENAI_API_KEY=Xq9vB2mLk4Rt8Wz1Np6Hs3Dy7Fc5Gj0Ua2Ei",
        "Xq9vB2mLk4Rt8Wz1Np6Hs3Dy7Fc5Gj0Ua2Ei",
    ),
    (
        "curl -H 'Authorization: Bearer 8f3Kd92LmQx7Rv1Tz4Yw6Np0Hs5Bj' https://api.example.com",
        "8f3Kd92LmQx7Rv1Tz4Yw6Np0Hs5Bj",
    ),
    ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    ("db.connect(password=\"Tr0ub4dor&3xq\")", "Tr0ub4dor&3xq"),
    (
        "  password: 'correct-horse-battery-9'",
        "correct-horse-battery-9",
    ),
    (
        "token: 7dF9kL2mQ8xR4vT1zY6wN3pH0sB5jC",
        "7dF9kL2mQ8xR4vT1zY6wN3pH0sB5jC",
    ),
    (
        "{\"client_id\": \"app\", \"client_secret\": \"Pq8Rs2Tu6Vw0Xy4Za1Bc5De9Fg3Hi7Jk\"}",
        "Pq8Rs2Tu6Vw0Xy4Za1Bc5De9Fg3Hi7Jk",
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=devstore;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    ),
    (
        "TWILIO_KEY_SID SK2f8c1a9e4b7d3f6a0c5e8b1d4f7a2c9e",
        "SK2f8c1a9e4b7d3f6a0c5e8b1d4f7a2c9e",
    ),
    (
        "sendgrid: 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",
        "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",
    ),
    (
        "headers = {\"Authorization\": \"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiIsInJvbGUiOiJvd25lciJ9.kq3Vd8Rk2LmQx7Rv1Tz4Yw6Np0Hs5Bj9Fc\"}",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiIsInJvbGUiOiJvd25lciJ9.kq3Vd8Rk2LmQx7Rv1Tz4Yw6Np0Hs5Bj9Fc",
    ),
];

/// Lines that look like secrets to a careless rule and must survive whole.
pub const LOOKALIKES: &[&str] = &[
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "\"head_sha\": \"3f786850e387550fdab836ed7e6dc881de23001b\"",
    "HEAD is now at 9fceb02 Fix the token refresh",
    "\"request_id\": \"123e4567-e89b-12d3-a456-426614174000\"",
    "idempotency_key: 123e4567-e89b-12d3-a456-426614174000",
    "<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\">",
    "const FIXTURE_JWT = \"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c\";",
    "max_tokens: 4096",
    "the password must be at least 12 characters",
    "password: ${DB_PASSWORD}",
    "let key = map.get(&id)?;",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
];
