CREATE TEMP TABLE acc AS SELECT 'acct-'||i AS a, get_shard_id_for_distribution_column('account_states','acct-'||i) AS shard FROM generate_series(1,400) i;
SELECT shard, (SELECT nodeport FROM pg_dist_shard_placement p WHERE p.shardid=acc.shard) port, (array_agg(a ORDER BY a))[1:4] FROM acc GROUP BY shard ORDER BY shard LIMIT 6;
SELECT shardid, shardminvalue, shardmaxvalue FROM pg_dist_shard WHERE logicalrelid='account_states'::regclass ORDER BY shardid LIMIT 3;
