-- 018_campaign_code_customer: a campaign code may be bound to one customer
-- (a shop's own code imported with a customerId): the reservation rule
-- then takes the code's customer as the voucher's (voucherd_eligibility,
-- CUSTOMER_MISMATCH). NULL serves every customer, as every generated code.
ALTER TABLE campaign_code ADD COLUMN customer text;
ALTER TABLE campaign_code ADD CONSTRAINT campaign_code_customer_format CHECK (customer ~ '^[A-Za-z0-9._:@+-]{1,64}$');
