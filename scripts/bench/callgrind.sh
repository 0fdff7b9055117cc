#!/usr/bin/env bash
# The gateway's instructions a call, counted by valgrind's callgrind: repeatable for the same
# binary and load whatever else the machine is doing (it counts instructions, not time). Loopback
# only.
#
#   scripts/bench/callgrind.sh [http|stdio] [call-tool|native] [SESSIONS] [CALLS] [GATEWAY]
#
# Starts the echo server (over streamable HTTP, or as the gateway's stdio downstream) and the
# gateway under callgrind, warms it up with SESSIONS x 50 calls, zeroes the counters, runs
# SESSIONS x CALLS calls of the echo tool (through `call_tool`, or natively), and prints the
# gateway's instructions per call. The profile stays in $OUT (default: a temp dir) for
# `callgrind_annotate`. Defaults: http call-tool 10 300, target/release/examples/gateway.
# Needs the release examples: `cargo build --release --example gateway --example echo_server
# --example loadgen`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bins=${BINS:-$root/target/release/examples}
downstream=${1:-http} how=${2:-call-tool} sessions=${3:-10} calls=${4:-300}
gateway=${5:-$bins/gateway}
work=$(mktemp -d /tmp/callgrind.XXXX)
out=${OUT:-$work/callgrind.out}
port=19202 echo_port=19201
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

mkdir -p "$work/config/mcpservers"
printf 'aggregator:\n  host: 127.0.0.1\n  port: %s\n  musterPrefix: x\n  exposure: both\n' "$port" > "$work/config/config.yaml"
case $downstream in
  http)
    "$bins/echo_server" --http "127.0.0.1:$echo_port" > /dev/null 2>&1 &
    pids+=($!)
    printf 'apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: echo\nspec:\n  type: streamable-http\n  url: http://127.0.0.1:%s/mcp\n  timeout: 30\n' "$echo_port" > "$work/config/mcpservers/echo.yaml"
    ;;
  stdio)
    printf 'apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: echo\nspec:\n  type: stdio\n  command: %s\n  timeout: 30\n' "$bins/echo_server" > "$work/config/mcpservers/echo.yaml"
    ;;
  *) echo "downstream: http or stdio, not $downstream" >&2; exit 2 ;;
esac
case $how in
  call-tool) call=(--call-tool echo) ;;
  native) call=(--native echo) ;;
  *) echo "how: call-tool or native, not $how" >&2; exit 2 ;;
esac

valgrind --tool=callgrind --callgrind-out-file="$out" "$gateway" serve --host 127.0.0.1 --port "$port" \
  --config-path "$work/config" > "$work/gateway.log" 2>&1 &
pids+=($!)
gw=$!
load() {
  "$bins/loadgen" run --url "http://127.0.0.1:$port/mcp" --warmup 0 "${call[@]}" "$@"
}
# Ready once a call goes through (the downstream connected).
for _ in $(seq 1 120); do
  load --sessions 1 --calls 1 > /dev/null 2>&1 && break
  sleep 0.5
done
load --sessions "$sessions" --calls 50 > /dev/null
callgrind_control -z "$gw" > /dev/null
load --sessions "$sessions" --calls "$calls" | tail -1
callgrind_control -d "$gw" > /dev/null
sleep 1
profile=$(ls -t "$out"* | head -1)
total=$(callgrind_annotate "$profile" 2> /dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
echo "$downstream $how, $sessions x $calls: $((total / (sessions * calls))) instructions a call ($profile)"
