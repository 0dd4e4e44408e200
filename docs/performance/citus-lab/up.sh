set -e
B=/usr/lib/postgresql/15/bin
cd /tmp/cst
for n in c:55431 w1:55432 w2:55433; do
  name=${n%%:*}; port=${n##*:}
  runuser -u postgres -- $B/initdb -D /tmp/cst/$name --locale=C -E UTF8 -A trust >/dev/null
  cat >> /tmp/cst/$name/postgresql.conf <<CONF
port=$port
listen_addresses='127.0.0.1'
unix_socket_directories='/tmp/cst'
shared_preload_libraries='citus'
shared_buffers=32MB
max_prepared_transactions=50
fsync=off
citus.log_remote_commands=off
CONF
  runuser -u postgres -- $B/pg_ctl -D /tmp/cst/$name -l /tmp/cst/$name.log -w start >/dev/null
  runuser -u postgres -- psql -h /tmp/cst -p $port -d postgres -qc "CREATE DATABASE t" 
  runuser -u postgres -- psql -h /tmp/cst -p $port -d t -qc "CREATE EXTENSION citus"
done
runuser -u postgres -- psql -h /tmp/cst -p 55431 -d t -qc "SELECT citus_set_coordinator_host('127.0.0.1',55431)" -c "SELECT citus_add_node('127.0.0.1',55432)" -c "SELECT citus_add_node('127.0.0.1',55433)"
echo up
