SET citus.shard_count = 32;
SELECT create_distributed_table('account_states','account_id');
SELECT create_distributed_table(t,'account_id',colocate_with=>'account_states') FROM unnest(array['devices','reports','transactions','entitlements','events','deliveries','delivery_attempts','usage_entries','usage_holds','usage_periods','usage_totals','store_expiry_checks']) t;
SELECT create_distributed_table('transaction_owners','original_transaction_id',colocate_with=>'none');
SELECT create_distributed_table('app_account_tokens','app_account_token',colocate_with=>'none');
SELECT create_distributed_table('store_notifications','notification_uuid',colocate_with=>'none');
SELECT create_distributed_table('rate_buckets','key',colocate_with=>'none');
SELECT create_reference_table('webhook_endpoints');
