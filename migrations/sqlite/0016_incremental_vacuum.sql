-- no-transaction
-- Incremental auto-vacuum, so that deleting a run gives its pages back to the file system
-- (the store runs `PRAGMA incremental_vacuum` after each deletion) instead of keeping them
-- on the free list, where the file never shrinks. New files are created in this mode (a
-- connection option, set before their first table); a file made before this migration has
-- auto_vacuum NONE, which only a VACUUM changes: done here, once. It rewrites the file
-- (seconds for a few hundred MB) and needs as much free disk while it runs. VACUUM cannot
-- run inside a transaction, hence `no-transaction`.
PRAGMA auto_vacuum = INCREMENTAL;
VACUUM;
