-- 013_young_table_statistics: autovacuum first measures the tables that grow
-- with every reservation once they hold about a thousand rows.
--
-- With the defaults, autovacuum's first visit to a new database (within a
-- minute of its start) analyzes or vacuums voucher_redemption while it holds
-- a few dozen rows on one page. A statement prepared then (by a pooled
-- connection, or inside a stored function) soon settles on a generic plan,
-- and for a one-page table that is a sequential scan; it keeps being reused
-- until the next ANALYZE, a minute or more later, while a flash sale grows
-- the table by thousands of rows a second, so every lookup reads every row.
-- A table never measured is planned as at least ten pages, where the
-- indexes win; from a thousand rows on, measured tables are too.
ALTER TABLE voucher_redemption SET (
    autovacuum_analyze_threshold = 1000,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_threshold = 1000);
ALTER TABLE voucher_customer_usage SET (
    autovacuum_analyze_threshold = 1000,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_threshold = 1000);
