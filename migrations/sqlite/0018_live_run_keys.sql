-- A run streamed in line protocol is found by its key (sender and run key) by whichever
-- process receives its points, so one stream is one run even when a load balancer spreads
-- it over several replicas. At most one run per key is open (live) at a time.
-- live_seen_ms: when the run last received data (unix epoch ms), for closing idle runs.
ALTER TABLE runs ADD COLUMN live_key TEXT;
ALTER TABLE runs ADD COLUMN live_seen_ms INTEGER;
CREATE UNIQUE INDEX runs_open_live_key ON runs (live_key) WHERE status = 'live';
