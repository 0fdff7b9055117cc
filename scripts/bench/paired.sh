#!/usr/bin/env bash
# Two loads at the same time on this machine, so that its noise (other tenants, frequency,
# stolen time) falls on both: the CPU per call of what each measures. Loopback only.
#
#   scripts/bench/paired.sh GATEWAY_A GATEWAY_B [ROUNDS] [SESSIONS] [CALLS]
#       two gateway binaries, each with an HTTP echo server of its own behind it, each called
#       through `call_tool`: the gateways' CPU a call, side by side.
#   scripts/bench/paired.sh GATEWAY direct [ROUNDS] [SESSIONS] [CALLS]
#       the gateway (echo server behind it, `call_tool`) against an echo server called directly:
#       the gateway's CPU a call over the direct echo server's, issue 9's ratio, measured at once.
#
# A spec may carry environment for its gateway: `path/to/gateway+NAME=VALUE;NAME=VALUE`.
# The sides swap every round. The echo server and the load generator are the release examples
# (`cargo build --release --example echo_server --example loadgen`).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bins=${BINS:-$root/target/release/examples}
A=$1 B=$2 rounds=${3:-4} sessions=${4:-10} calls=${5:-2000}
work=$(mktemp -d /tmp/paired.XXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

# Starts what `spec` names on `port`, with an echo server on `echo_port`; sets `pid` (the
# process to measure) and `at` (the port its load goes to).
start() {
  local spec=$1 port=$2 echo_port=$3
  "$bins/echo_server" --http "127.0.0.1:$echo_port" > /dev/null 2>&1 &
  pids+=($!)
  if [[ $spec == direct ]]; then
    pid=$! at=$echo_port
    return
  fi
  local dir=$work/$port bin=${spec%%+*} envs=
  [[ $spec == *+* ]] && envs=${spec#*+}
  mkdir -p "$dir/mcpservers"
  printf 'aggregator:\n  host: 127.0.0.1\n  port: %s\n  musterPrefix: x\n  exposure: both\n' "$port" > "$dir/config.yaml"
  printf 'apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: echo\nspec:\n  type: streamable-http\n  url: http://127.0.0.1:%s/mcp\n  timeout: 30\n' "$echo_port" > "$dir/mcpservers/echo.yaml"
  env ${envs//;/ } "$bin" serve --host 127.0.0.1 --port "$port" --config-path "$dir" > "$dir/log" 2>&1 &
  pids+=($!)
  pid=$! at=$port
}

# The load of `spec` on `port` (a gateway: through call_tool), measuring `pid`; prints its CPU a call.
load() {
  local spec=$1 pid=$2 port=$3 out=$4 how=()
  [[ $spec != direct ]] && how=(--call-tool echo)
  for _ in $(seq 1 60); do
    "$bins/loadgen" run --url "http://127.0.0.1:$port/mcp" --sessions 1 --calls 1 --warmup 0 "${how[@]}" > /dev/null 2>&1 && break
    sleep 0.3
  done
  "$bins/loadgen" run --url "http://127.0.0.1:$port/mcp" --sessions "$sessions" --calls "$calls" "${how[@]}" --pid "server=$pid" > "$out" 2>&1
}

cpu() { tail -1 "$1" | awk -F'|' '{gsub(/ /, "", $9); print $9}'; }

for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then X=$A Y=$B; else X=$B Y=$A; fi
  start "$X" 18961 18971
  px=$pid portx=$at
  start "$Y" 18962 18972
  py=$pid porty=$at
  load "$X" "$px" "$portx" "$work/x" & lx=$!
  load "$Y" "$py" "$porty" "$work/y" & ly=$!
  wait "$lx" "$ly"
  echo "round $round: $X $(cpu "$work/x") µs | $Y $(cpu "$work/y") µs"
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
done
