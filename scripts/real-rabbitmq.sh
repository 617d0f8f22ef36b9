#!/usr/bin/env bash
# Start a live RabbitMQ of the given version for the conformance tests, and print its AMQP URL as the last line.
#
#   scripts/real-rabbitmq.sh 3.10   the system RabbitMQ (Debian bookworm's 3.10.8) on 5672, management on 15672;
#                                   on a machine without one, bookworm's 3.10.8 in a chroot on 5676 (mgmt 15676)
#   scripts/real-rabbitmq.sh 4.0    Debian trixie's 4.0.5 in a chroot on 5675, management on 15675
#   scripts/real-rabbitmq.sh 4.3    Debian sid's 4.3.6 in a chroot on 5674, management on 15674
#   scripts/real-rabbitmq.sh stop 4.3   stop a chroot broker
#   scripts/real-rabbitmq.sh ctl 4.3 ARGS...   run that broker's rabbitmqctl (3.10: the system one)
#
# A chroot is built once with debootstrap (about 40 s) into $FAKERABBIT_RABBITMQ_CACHE (default
# /var/cache/fakerabbit-rabbitmq) and reused; a running broker is left running. Needs root (debootstrap, chroot,
# mount) for 4.0 and 4.3. Idempotent: run it as often as you like.
set -euo pipefail

cache="${FAKERABBIT_RABBITMQ_CACHE:-/var/cache/fakerabbit-rabbitmq}"
mirror="${FAKERABBIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { echo "real-rabbitmq: $*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# AMQP is up when the broker answers the protocol header with connection.start (frame type 1).
amqp_ready() {
  python3 - "$1" <<'EOF'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    s.sendall(b"AMQP\x00\x00\x09\x01")
    data = s.recv(7)
    sys.exit(0 if data[:1] == b"\x01" else 1)
except OSError:
    sys.exit(1)
EOF
}

wait_ready() {  # port seconds
  for _ in $(seq 1 "$2"); do
    amqp_ready "$1" && return 0
    sleep 1
  done
  return 1
}

usage() { echo "usage: $0 {3.10|4.0|4.3} | $0 stop {4.0|4.3} | $0 ctl {3.10|4.0|4.3} ARGS..." >&2; exit 2; }

[ $# -ge 1 ] || usage

chroot_params() {  # version -> suite port mgmt dist node
  case "$1" in
    3.10) suite=bookworm; port=5676; mgmt=15676; dist=25676; node=rabbit310 ;;
    4.0) suite=trixie; port=5675; mgmt=15675; dist=25675; node=rabbit40 ;;
    4.3) suite=sid; port=5674; mgmt=15674; dist=25674; node=rabbit43 ;;
    *) usage ;;
  esac
  dir="$cache/$1"
}

system310() { [ "${FAKERABBIT_SYSTEM_RABBITMQ:-1}" != 0 ] && command -v rabbitmq-server >/dev/null 2>&1; }

if [ "$1" = ctl ]; then
  [ $# -ge 2 ] || usage
  if [ "$2" = 3.10 ] && system310; then shift 2; exec rabbitmqctl "$@"; fi
  chroot_params "$2"
  shift 2
  exec chroot "$dir" /usr/bin/env HOME=/var/lib/rabbitmq /usr/sbin/rabbitmqctl -n "$node@localhost" "$@"
fi

if [ "$1" = stop ]; then
  [ $# -eq 2 ] || usage
  chroot_params "$2"
  if [ -x "$dir/usr/sbin/rabbitmqctl" ]; then
    chroot "$dir" /usr/bin/env HOME=/var/lib/rabbitmq /usr/sbin/rabbitmqctl -n "$node@localhost" stop >/dev/null 2>&1 || true
  fi
  exit 0
fi

version="$1"

if [ "$version" = 3.10 ] && system310; then
  if ! amqp_ready 5672; then
    log "starting the system RabbitMQ"
    rabbitmq-server -detached >/dev/null 2>&1 || true
    wait_ready 5672 90 || { log "the system RabbitMQ did not start"; exit 1; }
    rabbitmqctl await_startup >/dev/null 2>&1 || true
  fi
  if ! port_open 15672; then
    rabbitmq-plugins enable rabbitmq_management >/dev/null 2>&1 \
      || rabbitmq-plugins enable --offline rabbitmq_management >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do port_open 15672 && break; sleep 1; done
  fi
  echo "amqp://guest:guest@127.0.0.1:5672/%2F"
  exit 0
fi

chroot_params "$version"

provision() {
  command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    apt-get update -qq >/dev/null && apt-get install -y -qq debootstrap >/dev/null
  }
  mkdir -p "$cache"
  local tmp="$dir.partial"
  rm -rf "$tmp"
  log "building a $suite chroot with rabbitmq-server into $dir (about a minute)"
  debootstrap --variant=minbase --include=rabbitmq-server,python3 "$suite" "$tmp" "$mirror" >"$cache/$version.debootstrap.log" 2>&1 \
    || { log "debootstrap failed: see $cache/$version.debootstrap.log"; exit 1; }
  # Make sure the package is really there (a mirror hiccup can leave a partial install).
  [ -x "$tmp/usr/sbin/rabbitmq-server" ] || { log "rabbitmq-server missing after debootstrap"; exit 1; }
  # The package's own service would start at install time under a real init; inside the chroot nothing runs.
  mv "$tmp" "$dir"
}

configure() {
  cp /etc/hosts "$dir/etc/hosts"
  [ -f /etc/resolv.conf ] && cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  mkdir -p "$dir/etc/rabbitmq"
  cat >"$dir/etc/rabbitmq/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$port
management.tcp.port = $mgmt
management.tcp.ip = 127.0.0.1
loopback_users = none
EOF
  cat >"$dir/etc/rabbitmq/rabbitmq-env.conf" <<EOF
NODENAME=$node@localhost
DIST_PORT=$dist
EOF
  echo "[rabbitmq_management]." >"$dir/etc/rabbitmq/enabled_plugins"
  mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
}

if ! wait_ready "$port" 1; then
  [ -x "$dir/usr/sbin/rabbitmq-server" ] || provision
  configure
  # epmd is shared with the host (the system broker starts one); make sure one runs.
  if ! port_open 4369; then
    (epmd -daemon >/dev/null 2>&1 || chroot "$dir" /usr/bin/epmd -daemon >/dev/null 2>&1 || true)
  fi
  log "starting RabbitMQ $version ($node) on $port"
  chroot "$dir" /usr/bin/env HOME=/var/lib/rabbitmq /usr/sbin/rabbitmq-server \
    >"$cache/$version.server.log" 2>&1 </dev/null &
  disown || true
  wait_ready "$port" 120 || { log "RabbitMQ $version did not start: see $cache/$version.server.log"; tail -20 "$cache/$version.server.log" >&2; exit 1; }
  for _ in $(seq 1 60); do port_open "$mgmt" && break; sleep 1; done
fi
echo "amqp://guest:guest@127.0.0.1:$port/%2F"
