-- Renewal details (issue #51 part 5, seed 004): what a subscription's renewal info says of its end
-- and its next renewal, kept with the report that carried it. From a verified signed renewal info
-- (device reports, App Store notifications, App Store Server API answers) with renewal_signed_at
-- its signedDate, or from a development-mode device's unsigned fields with renewal_signed_at NULL.
-- All NULL when the report says nothing of it (every report stored before this). The resolver
-- takes, per subscription, the details signed latest (docs/RESOLUTION.md, "Renewal details").
ALTER TABLE reports ADD COLUMN IF NOT EXISTS expiration_reason text;
ALTER TABLE reports ADD COLUMN IF NOT EXISTS renewal_product_id text;
ALTER TABLE reports ADD COLUMN IF NOT EXISTS price_increase_status text;
ALTER TABLE reports ADD COLUMN IF NOT EXISTS renewal_date timestamptz;
ALTER TABLE reports ADD COLUMN IF NOT EXISTS renewal_signed_at timestamptz;
-- Whether the report carried renewal details at all (a signed renewal info with none of the four
-- still says "nothing pending" as of its signing time).
ALTER TABLE reports ADD COLUMN IF NOT EXISTS has_renewal boolean NOT NULL DEFAULT false;
