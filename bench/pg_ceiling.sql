-- One interrupt cycle's SQL, as interlock's PostgreSQL store sends it (bench/pg_ceiling.py runs it
-- with pgbench -M prepared; one pgbench "transaction" is one whole cycle). Each \startpipeline ...
-- \endpipeline block is one round trip; BEGIN ... COMMIT are the store's transactions. Keep it in
-- step with src/interlock/stores/postgres/*.py (bench/pg_trips.py --verbose lists what a cycle sends).
\set n random(1, 1000000000000)
\set created random(1700000000000000, 1800000000000000)
\set mrev random(1, 140737488355327)

-- the pause turn: the store's ready() check, then the tool call's journal intent (autocommitted)
SELECT pg_is_in_recovery();
INSERT INTO interlock_journal (tenant, key, session_id, snapshot_id, attempt, entry)
    SELECT '', 'k' || :n::text, 's' || :n::text, 'p' || :n::text, 1, '{"key": "k", "sessionId": "s", "snapshotId": "p", "agent": "bank", "tool": "transfer", "ref": "t1", "inputDigest": "688846c1365742480b06ed4faf0dc851", "attempt": 1, "status": "running", "output": null, "steps": {}, "turnId": "p", "startedAt": "2026-12-02T185150.465005Z", "finishedAt": null, "attempts": []}'
    WHERE set_config('synchronous_commit', 'on', true) IS NOT NULL ON CONFLICT (tenant, key) DO NOTHING;

-- the pause turn's commit: lock the (new) row and the journal entry (one statement), then write; the status
-- change is notified after COMMIT, in a transaction of its own that does not wait for the flush
\startpipeline
BEGIN;
WITH locked_rows AS (SELECT snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata
        FROM interlock_snapshots WHERE tenant = '' AND snapshot_id = ANY(ARRAY['p' || :n::text]) ORDER BY snapshot_id FOR UPDATE),
    locked_entries AS (SELECT key, entry FROM interlock_journal WHERE tenant = '' AND key = ANY(ARRAY['k' || :n::text]) ORDER BY key FOR UPDATE)
    SELECT *, NULL, NULL FROM locked_rows
    UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, key, entry FROM locked_entries;
\endpipeline
\startpipeline
WITH new_row AS (INSERT INTO interlock_snapshots (tenant, snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata)
    VALUES ('', 'p' || :n::text, 's' || :n::text, NULL, NULL, 0, '[{"role":"user","content":[{"text":"pay bob"}]},{"role":"model","content":[{"toolRequest":{"name":"transfer","ref":"t1","input":{"to":"bob","amount": 5}},"metadata":{"interrupt":{"to":"bob","amount": 5.0}}}]}]', :mrev::bigint, NULL, NULL, NULL, NULL, :created::bigint, 0, NULL, 'completed', 'interrupted', NULL, 1, NULL, NULL, '{"agent":"bank"}')),
    parent_leaf AS (
        DELETE FROM interlock_leaves WHERE tenant = '' AND session_id = 's' || :n::text AND snapshot_id = NULL
    ), parent_entries AS (
        DELETE FROM interlock_open_interrupts WHERE tenant = '' AND snapshot_id = NULL AND session_id = 's' || :n::text
    )
    INSERT INTO interlock_leaves (tenant, session_id, snapshot_id, created_us)
    SELECT '', 's' || :n::text, 'p' || :n::text, :created::bigint
    WHERE true AND NOT EXISTS (SELECT 1 FROM interlock_snapshots WHERE tenant = '' AND session_id = 's' || :n::text AND parent_id = 'p' || :n::text)
    ON CONFLICT DO NOTHING;
INSERT INTO interlock_open_interrupts (tenant, snapshot_id, position, session_id, agent, tool, ref, created_us, deadline_us, in_doubt, claimed_by, claim_until_us, part)
    SELECT '', 'p' || :n::text, 0, 's' || :n::text, 'bank', 'transfer', 't1', :created::bigint, NULL, 0, NULL, NULL, '{"toolRequest":{"name":"transfer","ref":"t1","input":{"to":"bob","amount": 5}},"metadata":{"interrupt":{"to":"bob","amount": 5.0}}}'
    WHERE NOT EXISTS (SELECT 1 FROM interlock_snapshots WHERE tenant = '' AND session_id = 's' || :n::text AND parent_id = 'p' || :n::text AND status = 'completed' LIMIT 1);
UPDATE interlock_journal SET key = 'k' || :n::text, session_id = 's' || :n::text, snapshot_id = 'p' || :n::text, attempt = 1, entry = '{"key": "k", "sessionId": "s", "snapshotId": "p", "agent": "bank", "tool": "transfer", "ref": "t1", "inputDigest": "688846c1365742480b06ed4faf0dc851", "attempt": 1, "status": "interrupted", "output": null, "steps": {}, "turnId": "p", "startedAt": "2026-12-02T185150.465005Z", "finishedAt": "2026-12-02T185150.466260Z", "attempts": []}'
    WHERE tenant = '' AND key = 'k' || :n::text;
COMMIT;
SELECT pg_notify('interlock_snapshots', p) FROM unnest(ARRAY['["", "p' || :n::text || '"]'])
    AS p WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL;
\endpipeline

-- the resume: load the paused row (autocommitted)
SELECT snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata
    FROM interlock_snapshots WHERE tenant = '' AND snapshot_id = 'p' || :n::text;

-- the claim: fence the paused row (its claim columns) and its open interrupt, and the journal entry
\startpipeline
BEGIN;
WITH locked_rows AS (SELECT snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata
        FROM interlock_snapshots WHERE tenant = '' AND snapshot_id = ANY(ARRAY['p' || :n::text]) ORDER BY snapshot_id FOR UPDATE),
    locked_entries AS (SELECT key, entry FROM interlock_journal WHERE tenant = '' AND key = ANY(ARRAY['k' || :n::text]) ORDER BY key FOR UPDATE)
    SELECT *, NULL, NULL FROM locked_rows
    UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, key, entry FROM locked_entries;
\endpipeline
\startpipeline
UPDATE interlock_snapshots SET
        base_id = NULL, parent_id = NULL, state_session = NULL, custom = NULL, artifacts = NULL, created_us = :created::bigint,
        updated_us = 3853, heartbeat_us = NULL, status = 'completed', finish_reason = 'interrupted', error = NULL, version = 2,
        claimed_by = 'r' || :n::text, claimed_us = 60003830, metadata = '{"agent":"bank"}'
    WHERE tenant = '' AND snapshot_id = 'p' || :n::text;
DELETE FROM interlock_open_interrupts WHERE tenant = '' AND snapshot_id = 'p' || :n::text;
INSERT INTO interlock_open_interrupts (tenant, snapshot_id, position, session_id, agent, tool, ref, created_us, deadline_us, in_doubt, claimed_by, claim_until_us, part)
    SELECT '', 'p' || :n::text, 0, 's' || :n::text, 'bank', 'transfer', 't1', :created::bigint, NULL, 0, 'r' || :n::text, :created::bigint + 60000000, '{"toolRequest":{"name":"transfer","ref":"t1","input":{"to":"bob","amount": 5}},"metadata":{"interrupt":{"to":"bob","amount": 5.0}}}'
    WHERE NOT EXISTS (SELECT 1 FROM interlock_snapshots WHERE tenant = '' AND session_id = 's' || :n::text AND parent_id = 'p' || :n::text AND status = 'completed' LIMIT 1);
UPDATE interlock_journal SET key = 'k' || :n::text, session_id = 's' || :n::text, snapshot_id = 'p' || :n::text, attempt = 2, entry = '{"key": "k", "sessionId": "s", "snapshotId": "p", "agent": "bank", "tool": "transfer", "ref": "t1", "inputDigest": "688846c1365742480b06ed4faf0dc851", "attempt": 2, "status": "running", "output": null, "steps": {}, "turnId": "r", "startedAt": "2026-12-02T185150.465005Z", "finishedAt": null, "attempts": [{"attempt": 1, "turn": "p", "status": "interrupted", "at": "2026-12-02T185150.465005Z"}]}'
    WHERE tenant = '' AND key = 'k' || :n::text;
COMMIT;
\endpipeline

-- the resumed tool's journal outcome (autocommitted, fenced by the attempt)
UPDATE interlock_journal SET attempt = 2, entry = '{"key": "k", "sessionId": "s", "snapshotId": "p", "agent": "bank", "tool": "transfer", "ref": "t1", "inputDigest": "688846c1365742480b06ed4faf0dc851", "attempt": 2, "status": "done", "output": "sent", "steps": {}, "turnId": "r", "startedAt": "2026-12-02T185150.465005Z", "finishedAt": "2026-12-02T185150.471589Z", "attempts": [{"attempt": 1, "turn": "p", "status": "interrupted", "at": "2026-12-02T185150.465005Z"}]}'
    WHERE tenant = '' AND key = 'k' || :n::text AND attempt = 2 AND set_config('synchronous_commit', 'on', true) IS NOT NULL;

-- the resume's commit: release the claim on the paused row, write the new row, link it
\startpipeline
BEGIN;
SELECT snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata
    FROM interlock_snapshots WHERE tenant = '' AND snapshot_id = ANY(ARRAY['p' || :n::text, 'r' || :n::text]) ORDER BY snapshot_id FOR UPDATE;
\endpipeline
\startpipeline
UPDATE interlock_snapshots SET
        base_id = NULL, parent_id = NULL, state_session = NULL, custom = NULL, artifacts = NULL, created_us = :created::bigint,
        updated_us = 6482, heartbeat_us = NULL, status = 'completed', finish_reason = 'interrupted', error = NULL, version = 3,
        claimed_by = 'r' || :n::text, claimed_us = NULL, metadata = '{"agent":"bank"}'
    WHERE tenant = '' AND snapshot_id = 'p' || :n::text;
DELETE FROM interlock_open_interrupts WHERE tenant = '' AND snapshot_id = 'p' || :n::text;
WITH new_row AS (INSERT INTO interlock_snapshots (tenant, snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata)
    VALUES ('', 'r' || :n::text, 's' || :n::text, 'p' || :n::text, NULL, 1, '[{"role":"model","content":[{"toolRequest":{"name":"transfer","ref":"t1","input":{"to":"bob","amount": 5}},"metadata":{"resolvedInterrupt":{"to":"bob","amount": 5.0}}}]},{"role":"tool","content":[{"toolResponse":{"name":"transfer","ref":"t1","output":"sent"}}],"metadata":{"resumed": true}},{"role":"model","content":[{"text":"paid"}]}]', :mrev::bigint + 1, :mrev::bigint, NULL, NULL, NULL, :created::bigint + 6000, 0, NULL, 'completed', 'stop', NULL, 1, NULL, NULL, '{"agent":"bank"}')),
    parent_leaf AS (
        DELETE FROM interlock_leaves WHERE tenant = '' AND session_id = 's' || :n::text AND snapshot_id = 'p' || :n::text
    ), parent_entries AS (
        DELETE FROM interlock_open_interrupts WHERE tenant = '' AND snapshot_id = 'p' || :n::text AND session_id = 's' || :n::text
    )
    INSERT INTO interlock_leaves (tenant, session_id, snapshot_id, created_us)
    SELECT '', 's' || :n::text, 'r' || :n::text, :created::bigint + 6000
    WHERE true AND NOT EXISTS (SELECT 1 FROM interlock_snapshots WHERE tenant = '' AND session_id = 's' || :n::text AND parent_id = 'r' || :n::text)
    ON CONFLICT DO NOTHING;
COMMIT;
SELECT pg_notify('interlock_snapshots', p) FROM unnest(ARRAY['["", "r' || :n::text || '"]'])
    AS p WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL;
\endpipeline
