-- Version 14, as migrations/0014_fleet_certificates.sql: when each member's newest
-- certificate expires, set when the service signs one (enrolment, renewal).
ALTER TABLE fleet_members ADD COLUMN cert_expires_at BIGINT;
