-- Alert channels changed at run time: the console and GET /api/v1/alert-channels show each
-- channel's last delivery. The delivery log (alert_group_deliveries, one row per attempt) is
-- never pruned; without this index finding a channel's newest row scans the whole log
-- (260 ms at 1M rows, measured), with it each is one index seek (0.2 ms).
CREATE INDEX alert_group_deliveries_channel ON alert_group_deliveries (channel, id);
