-- 006_function_verdicts: helpers whose signature changed or that are gone.
--
-- The rule checks now return their verdict instead of raising
-- (voucherd_order_verdict, voucherd_eligibility), and rejections carry facts
-- instead of wording (voucherd_reject's second parameter). CREATE OR REPLACE
-- cannot rename a parameter or change a result type, so the old helpers are
-- dropped here; functions/ creates their successors in the same transaction,
-- before anything can call them. IF EXISTS: a database created by this
-- version never had them.
DROP FUNCTION IF EXISTS voucherd_check_order(voucher_redemption, text, bigint);
DROP FUNCTION IF EXISTS voucherd_check_eligible(voucher, bigint, timestamptz);
DROP FUNCTION IF EXISTS voucherd_held_out_message(text);
DROP FUNCTION IF EXISTS voucherd_ts(timestamptz);
DROP FUNCTION IF EXISTS voucherd_reject(text, text, text);
