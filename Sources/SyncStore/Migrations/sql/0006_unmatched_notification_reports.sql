-- App Store notifications that arrive before any account has their purchase (issue #7): the
-- verified report each one makes is kept, and stored for the account that first binds the
-- purchase (its device's first verified report of it), in that binding's transaction. Without
-- it, a REFUND that reached us before the device's first sync would be lost, and the purchase
-- would stay active.
ALTER TABLE store_notifications ADD COLUMN report jsonb;
