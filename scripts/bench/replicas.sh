#!/usr/bin/env bash
# Gateway replicas behind haproxy, sharing their sign-in state in Valkey (a real redis-server):
# calls per second through haproxy with 1, 2 and 3 replicas, each replica's CPU a call, and the
# Valkey commands a call. Loopback only; everything it starts is stopped when it ends.
#
#   scripts/bench/replicas.sh [SESSIONS] [CALLS]
#
# Each round starts N replicas (`gateway serve`, each with a config directory of its own, all
# with `aggregator.oauth.server.storage.type: valkey`, sign-in by link enabled, one key file),
# haproxy in front of them as docs/replicas.md routes (a session sticks to the replica that
# answered its initialize, by `Mcp-Session-Id`), and one HTTP echo server behind them; warms up,
# zeroes Valkey's command counts, runs SESSIONS x CALLS `call_tool` calls of the echo tool
# through haproxy, and reports. The echo tool needs no sign-in, so a call should cost Valkey
# nothing: the target is 0 commands a call.
#
# On a 2-core machine the replicas, haproxy, the echo server and the load generator share two
# cores: more replicas show the overhead of spreading the load, not scaling.
#
# Needs haproxy and redis-server (Debian packages `haproxy`, `redis-server`) and the release
# examples: `cargo build --release --example gateway --example echo_server --example loadgen`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bins=${BINS:-$root/target/release/examples}
sessions=${1:-10} calls=${2:-2000}
for tool in haproxy redis-server redis-cli; do
  command -v "$tool" > /dev/null || {
    echo "replicas.sh needs $tool (apt-get install haproxy redis-server)" >&2
    exit 2
  }
done
work=$(mktemp -d /tmp/replicas.XXXX)
redis_port=19300 echo_port=19301 front_port=19310
pids=()
round_pids=()
stop_round() {
  kill "${round_pids[@]}" 2> /dev/null || true
  wait "${round_pids[@]}" 2> /dev/null || true
  round_pids=()
}
trap 'stop_round; kill "${pids[@]}" 2> /dev/null || true; rm -rf "$work"' EXIT

redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$work" --save '' --appendonly no > "$work/redis.log" 2>&1 &
pids+=($!)
"$bins/echo_server" --http "127.0.0.1:$echo_port" > /dev/null 2>&1 &
pids+=($!)
head -c 32 /dev/urandom | base64 > "$work/state.key"
for _ in $(seq 1 50); do
  redis-cli -p "$redis_port" ping > /dev/null 2>&1 && break
  sleep 0.1
done

# The config directory of replica $1 (port $2).
config_dir() {
  local dir=$work/r$1
  mkdir -p "$dir/mcpservers"
  cat > "$dir/config.yaml" << EOF
aggregator:
  host: 127.0.0.1
  port: $2
  musterPrefix: x
  oauth:
    mcpClient:
      enabled: true
      publicUrl: http://127.0.0.1:$front_port
    server:
      encryptionKeyFile: $work/state.key
      storage:
        type: valkey
        valkey:
          url: redis://127.0.0.1:$redis_port
EOF
  printf 'apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: echo\nspec:\n  type: streamable-http\n  url: http://127.0.0.1:%s/mcp\n  timeout: 30\n' \
    "$echo_port" > "$dir/mcpservers/echo.yaml"
  echo "$dir"
}

# haproxy in front of replicas 1..$1: sessions stick to the replica that answered their
# initialize (the response's Mcp-Session-Id), new ones go round robin.
haproxy_config() {
  cat << EOF
global
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend mcp
  bind 127.0.0.1:$front_port
  default_backend replicas
backend replicas
  balance roundrobin
  stick-table type string len 128 size 100k expire 30m
  stick match req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
EOF
  for i in $(seq 1 "$1"); do
    echo "  server r$i 127.0.0.1:$((front_port + i)) check inter 1s"
  done
}

load() {
  "$bins/loadgen" run --url "http://127.0.0.1:$front_port/mcp" --call-tool echo "$@"
}

# Valkey's commands since the last reset (INFO itself not counted).
valkey_commands() {
  redis-cli -p "$redis_port" info commandstats |
    awk -F'[:=,]' '/^cmdstat_/ && $1 !~ /^cmdstat_(info|config)/ { n += $3 } END { print n + 0 }'
}

printf '| replicas | sessions × calls | calls/s | p50 ms | CPU µs a call, each replica | CPU µs a call, all replicas | Valkey commands a call |\n'
printf '|---:|---|---:|---:|---|---:|---:|\n'
for n in 1 2 3; do
  replica_pids=()
  for i in $(seq 1 "$n"); do
    dir=$(config_dir "$i" $((front_port + i)))
    "$bins/gateway" serve --config-path "$dir" > "$work/r$i.log" 2>&1 &
    round_pids+=($!)
    replica_pids+=($!)
  done
  haproxy_config "$n" > "$work/haproxy.cfg"
  haproxy -f "$work/haproxy.cfg" > "$work/haproxy.log" 2>&1 &
  round_pids+=($!)
  # Ready once a call goes through every replica (round robin spreads new sessions).
  for _ in $(seq 1 120); do
    load --sessions "$n" --calls 1 --warmup 0 > /dev/null 2>&1 && break
    sleep 0.5
  done
  load --sessions "$sessions" --calls 50 --warmup 0 > /dev/null
  redis-cli -p "$redis_port" config resetstat > /dev/null
  args=()
  for i in $(seq 1 "$n"); do
    args+=(--pid "r$i=${replica_pids[$((i - 1))]}")
  done
  row=$(load --sessions "$sessions" --calls "$calls" --warmup 0 "${args[@]}" | tail -1)
  commands=$(valkey_commands)
  # The row: | sessions × calls | calls/s | p50 | p95 | p99 | errors | not issued | r1 CPU | r1 switches | ... | client CPU |
  IFS='|' read -r -a cells <<< "$row"
  each=() total=0
  for i in $(seq 1 "$n"); do
    cpu=${cells[$((8 + 2 * (i - 1)))]// /}
    each+=("$cpu")
    total=$(awk -v a="$total" -v b="$cpu" 'BEGIN { print a + b }')
  done
  per_call=$(awk -v c="$commands" -v n="$((sessions * calls))" 'BEGIN { printf "%.3f", c / n }')
  errors=${cells[6]// /}
  [[ $errors == 0 ]] || echo "round with $n replicas: $errors errors" >&2
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$(echo "${cells[1]}" | xargs)" "${cells[2]// /}" "${cells[3]// /}" \
    "$(printf '%s / ' "${each[@]}" | sed 's| / $||')" "$total" "$per_call"
  [[ ${VERBOSE:-} ]] && redis-cli -p "$redis_port" info commandstats | grep '^cmdstat_' >&2
  stop_round
done
