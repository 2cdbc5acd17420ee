"""SQL the SQLite and PostgreSQL stores share: row codecs, history chains, index and outbox rows, schema versions."""
