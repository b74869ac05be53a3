-- When each member's newest certificate expires (docs/fleet.md, "Check it all"). The service
-- sets it when it signs one — at enrolment and at each renewal a sprite's relay asks for at
-- two thirds of the certificate's life — so `zodex fleet doctor` can name the members whose
-- certificate runs out soon: a relay that has not renewed is a relay the service has not
-- seen. NULL: enrolled before this version (unknown until its next certificate). Additive: a
-- replica of version 13 neither reads nor writes it.
ALTER TABLE fleet_members ADD COLUMN cert_expires_at INTEGER;
