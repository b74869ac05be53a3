-- Version 12: on PostgreSQL, only the database's owner may move an audit chain's base (prune)
-- and the publisher's role may move a head only by appending (migrations/postgres/0012). An
-- SQLite file has one writer, the publisher itself, and no roles: nothing changes here; the
-- version is counted so a store's version means the same on both.
SELECT 1;
