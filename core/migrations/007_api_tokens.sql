-- API tokens: each maps to one tenant, its groups and a role. Only a SHA-256 of the token is kept
-- (the token is a high-entropy random string, so a plain hash is enough); `id` is the short public
-- part printed inside the token, for listing and revoking without the secret.
CREATE TABLE api_tokens (
    id          text        PRIMARY KEY CHECK (id ~ '^[a-f0-9]{8,32}$'),
    token_hash  text        NOT NULL UNIQUE,
    tenant_id   text        NOT NULL,
    groups      text[]      NOT NULL CHECK (cardinality(groups) > 0),
    role        text        NOT NULL CHECK (role IN ('reader', 'writer', 'admin')),
    name        text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_tokens_tenant ON api_tokens (tenant_id, created_at);
