/// The migrations in `sql/` (`Sources/SyncStore/Migrations/sql`), compiled into the binary as
/// package resources, so `subsync migrate` needs no file beside it. A new migration is its file
/// and one line here; a test fails when the two disagree (`embeddedMigrationsMatchTheSQLFolder`).
extension Migration {
    /// Every migration, in version order.
    public static let embedded: [Migration] = [
        Migration(version: 1, name: "0001_initial", sql: PackageResources._001_initial_sql),
        Migration(version: 2, name: "0002_pending_reports_by_account", sql: PackageResources._002_pending_reports_by_account_sql),
        Migration(version: 3, name: "0003_operations", sql: PackageResources._003_operations_sql),
        Migration(version: 4, name: "0004_trust", sql: PackageResources._004_trust_sql),
        Migration(version: 5, name: "0005_delivery_order", sql: PackageResources._005_delivery_order_sql),
        Migration(version: 6, name: "0006_unmatched_notification_reports", sql: PackageResources._006_unmatched_notification_reports_sql),
        Migration(version: 7, name: "0007_report_fact_digest", sql: PackageResources._007_report_fact_digest_sql),
        Migration(version: 8, name: "0008_delivery_leases", sql: PackageResources._008_delivery_leases_sql),
        Migration(version: 9, name: "0009_rate_buckets", sql: PackageResources._009_rate_buckets_sql),
        Migration(version: 10, name: "0010_usage_ledger", sql: PackageResources._010_usage_ledger_sql),
        Migration(version: 11, name: "0011_usage_holds", sql: PackageResources._011_usage_holds_sql),
        Migration(version: 12, name: "0012_usage_audit", sql: PackageResources._012_usage_audit_sql),
        Migration(version: 13, name: "0013_usage_periods", sql: PackageResources._013_usage_periods_sql),
        Migration(version: 14, name: "0014_account_work", sql: PackageResources._014_account_work_sql),
        Migration(version: 15, name: "0015_operator_actions", sql: PackageResources._015_operator_actions_sql),
        Migration(version: 16, name: "0016_event_payload_json", sql: PackageResources._016_event_payload_json_sql),
        Migration(version: 17, name: "0017_drop_report_transaction_index", sql: PackageResources._017_drop_report_transaction_index_sql),
        Migration(version: 18, name: "0018_hold_window_on_citus", sql: PackageResources._018_hold_window_on_citus_sql),
        Migration(version: 19, name: "0019_credit_restored", sql: PackageResources._019_credit_restored_sql),
        Migration(version: 20, name: "0020_drop_event_id_index", sql: PackageResources._020_drop_event_id_index_sql),
        Migration(version: 21, name: "0021_operator_actions_by_target", sql: PackageResources._021_operator_actions_by_target_sql),
        Migration(version: 22, name: "0022_lock_functions_by_key", sql: PackageResources._022_lock_functions_by_key_sql),
        Migration(version: 23, name: "0023_skip_accounts_being_created", sql: PackageResources._023_skip_accounts_being_created_sql),
        Migration(version: 24, name: "0024_bind_claims", sql: PackageResources._024_bind_claims_sql),
        Migration(version: 25, name: "0025_reserve_new_accounts", sql: PackageResources._025_reserve_new_accounts_sql),
        Migration(version: 26, name: "0026_delivery_leases_in_place", sql: PackageResources._026_delivery_leases_in_place_sql),
        Migration(version: 27, name: "0027_claim_deliveries_by_pending", sql: PackageResources._027_claim_deliveries_by_pending_sql),
        Migration(version: 28, name: "0028_reports_pending_by_arrival", sql: PackageResources._028_reports_pending_by_arrival_sql),
        Migration(version: 29, name: "0029_analyze_queues_often", sql: PackageResources._029_analyze_queues_often_sql),
        Migration(version: 30, name: "0030_deliveries_due_by_time", sql: PackageResources._030_deliveries_due_by_time_sql),
        Migration(version: 31, name: "0031_states_as_json", sql: PackageResources._031_states_as_json_sql),
        Migration(version: 32, name: "0032_lock_states_as_json", sql: PackageResources._032_lock_states_as_json_sql),
        Migration(version: 33, name: "0033_lock_accounts_at_once", sql: PackageResources._033_lock_accounts_at_once_sql),
        Migration(version: 34, name: "0034_attempts_across_retries", sql: PackageResources._034_attempts_across_retries_sql),
        Migration(version: 35, name: "0035_claim_due_deliveries", sql: PackageResources._035_claim_due_deliveries_sql),
        Migration(version: 36, name: "0036_usage_ledger_v2", sql: PackageResources._036_usage_ledger_v2_sql),
        Migration(version: 37, name: "0037_usage_final_periods", sql: PackageResources._037_usage_final_periods_sql),
        Migration(version: 38, name: "0038_store_backfill", sql: PackageResources._038_store_backfill_sql),
        Migration(version: 39, name: "0039_store_expiry_checks", sql: PackageResources._039_store_expiry_checks_sql),
        Migration(version: 40, name: "0040_report_renewal_details", sql: PackageResources._040_report_renewal_details_sql),
        Migration(version: 41, name: "0041_token_revocations", sql: PackageResources._041_token_revocations_sql),
        Migration(version: 42, name: "0042_usage_transfers", sql: PackageResources._042_usage_transfers_sql),
        Migration(version: 43, name: "0043_work_buckets", sql: PackageResources._043_work_buckets_sql),
        Migration(version: 44, name: "0044_lock_by_shard_statically", sql: PackageResources._044_lock_by_shard_statically_sql),
        Migration(version: 45, name: "0045_oldest_pending_by_node", sql: PackageResources._045_oldest_pending_by_node_sql),
        Migration(version: 46, name: "0046_account_locks_on_their_node", sql: PackageResources._046_account_locks_on_their_node_sql),
        Migration(version: 47, name: "0047_work_queue_by_bucket", sql: PackageResources._047_work_queue_by_bucket_sql),
        Migration(version: 48, name: "0048_delivery_work", sql: PackageResources._048_delivery_work_sql),
    ]

    init(version: Int, name: String, sql bytes: [UInt8]) {
        self.init(version: version, name: name, sql: String(decoding: bytes, as: UTF8.self))
    }
}
