-- which accounts go to which shard
SELECT a, get_shard_id_for_distribution_column('account_states', a) AS shard,
       (SELECT nodeport FROM pg_dist_shard_placement p WHERE p.shardid = get_shard_id_for_distribution_column('account_states', a)) AS port,
       worker_hash(a), hashtext(a)
FROM unnest(array['a1','a2','a3','a4','a5','a6','a7','a8']) a;
