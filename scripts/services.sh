#!/usr/bin/env bash
# Local ZooKeeper, Redis and PostgreSQL for development and tests; see `services.sh help`.
set -euo pipefail

ZK_JAR=/usr/share/java/zookeeper.jar
# Debian's zookeeper.jar carries no SLF4J binding; these two (dependencies of
# libzookeeper-java) route its logging to log4j so DIR/zookeeper.log gets written.
ZK_LOG_JARS=/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
ZK_MAIN=org.apache.zookeeper.server.quorum.QuorumPeerMain
JAVA=${JAVA:-/usr/bin/java}
# The browser tests drive Debian's chromium through Playwright; never a Playwright download.
CHROMIUM=/usr/bin/chromium
START_TIMEOUT=${START_TIMEOUT:-30}
# ZooKeeper keeps the whole tree in its heap (about 400 bytes per znode, some 12 znodes and
# 1 KB of data per job). Unless ZK_HEAP is set, the heap is sized for the queue's capacity:
# 64 MB plus 8 KB per job of MQ_MAX_QUEUE_JOBS (default 25,000: 260m), never below 256m.
# The 100,000-job reconcile benchmark (about 1,050,000 znodes) needs ZK_HEAP=2g.
zk_heap_default() {
    local jobs=${MQ_MAX_QUEUE_JOBS:-25000} mb
    [[ $jobs =~ ^[0-9]+$ ]] || die "MQ_MAX_QUEUE_JOBS=$jobs is not a whole number of jobs"
    mb=$((64 + (jobs * 8 + 1023) / 1024))
    echo "$((mb > 256 ? mb : 256))m"
}
SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

die() {
    echo "services.sh: $*" >&2
    exit 1
}

ZK_HEAP=${ZK_HEAP:-$(zk_heap_default)}

usage() {
    cat <<'EOF'
usage: scripts/services.sh COMMAND [ARGS]
  ensure-zookeeper              install Debian's zookeeper package if missing (as root)
  ensure-chromium               install Debian's chromium package if missing (as root), for the
                                browser tests; does nothing when MQ_SKIP_BROWSER=1
  ensure-axe                    install axe-core from npm into node_modules/ (npm ci, from
                                package-lock.json) for the browser tests' accessibility checks;
                                installs Debian's npm first if missing (as root); does nothing
                                when MQ_SKIP_BROWSER=1
  ensure-postgres               install Debian's postgresql package if missing (as root); does
                                nothing when MQ_TEST_DATABASE_URL names a PostgreSQL server
  zk-start DIR PORT             start a standalone ZooKeeper with its config, data and log in DIR
  zk-stop DIR                   stop the ZooKeeper started in DIR
  zk-ensemble-start DIR         start a three-server ZooKeeper ensemble on free loopback ports
                                (servers in DIR/node1..3; prints the ZK_HOSTS string, also in
                                DIR/hosts); one server stops with zk-stop DIR/nodeN
  zk-ensemble-stop DIR          stop every server of the ensemble in DIR
  redis-start DIR PORT          start a non-persistent redis-server with its pid and log in DIR
  redis-stop DIR                stop the redis-server started in DIR
  pg-start DIR PORT             start a throw-away PostgreSQL cluster in DIR (trust auth, superuser
                                postgres) on 127.0.0.1:PORT, its unix socket in DIR
  pg-stop DIR                   stop the PostgreSQL cluster started in DIR
  free-port                     print a free TCP port on 127.0.0.1
  port-free PORT                exit 0 when PORT on 127.0.0.1 can be bound
  ports-check NAME=PORT[:PIDFILE]...
                                exit 0 when every PORT can be bound, or is listened on by the
                                live process of its PIDFILE (ours, from an earlier start), and
                                no two NAMEs share a port; otherwise name the port and NAME
  undo-started FILE             stop what the starts that logged to FILE started (newest first)
  with-test-services CMD ARGS   run CMD against a throw-away ZooKeeper and Redis
  proc-start PIDFILE LOG CMD    run CMD in the background in its own session (demo processes)
                                (zk-start, redis-start and proc-start append what they start to
                                the file MQ_STARTED_LOG names, when it is set, for undo-started)
  proc-stop PIDFILE             stop that session's process group
  wait-http URL [SECONDS]       wait until URL answers (default 30 s)
EOF
}

apt_install() {
    local pkg=$1
    if [ "$(id -u)" -ne 0 ]; then
        die "the Debian package '$pkg' is not installed; install it with: sudo apt-get install -y $pkg"
    fi
    echo "services.sh: installing Debian package '$pkg'" >&2
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg"
}

ensure_zookeeper() {
    [ -f "$ZK_JAR" ] || apt_install zookeeper
    [ -f "$ZK_JAR" ] || die "$ZK_JAR is still missing after installing 'zookeeper'"
    [ -x "$JAVA" ] || die "$JAVA not found; install the Debian package 'default-jre-headless'"
}

ensure_chromium() {
    if [ "${MQ_SKIP_BROWSER:-}" = 1 ]; then
        echo "services.sh: MQ_SKIP_BROWSER=1: browser tests skipped, chromium not checked" >&2
        return 0
    fi
    [ -x "$CHROMIUM" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        die "$CHROMIUM is missing; the browser tests need Debian's chromium:" \
            "sudo apt-get install -y chromium (or run with MQ_SKIP_BROWSER=1 to skip those tests)"
    fi
    apt_install chromium
    [ -x "$CHROMIUM" ] || die "$CHROMIUM is still missing after installing 'chromium'"
}

# The browser tests inject node_modules/axe-core/axe.min.js into each page they check. npm ci
# installs exactly package-lock.json's version; it runs again only when that version changes.
ensure_axe() {
    if [ "${MQ_SKIP_BROWSER:-}" = 1 ]; then
        echo "services.sh: MQ_SKIP_BROWSER=1: browser tests skipped, axe-core not installed" >&2
        return 0
    fi
    local root want have
    root=$(dirname "$(dirname "$SELF")")
    want=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["packages"]["node_modules/axe-core"]["version"])' \
        "$root/package-lock.json")
    have=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["version"])' "$root/node_modules/axe-core/package.json" \
        2>/dev/null || true)
    [ "$want" = "$have" ] && return 0
    command -v npm >/dev/null || apt_install npm
    command -v npm >/dev/null || die "npm is still missing after installing 'npm'"
    (cd "$root" && npm ci --no-audit --no-fund --loglevel=error) \
        || die "npm ci could not install axe-core $want (see package-lock.json)"
}

# The newest Debian PostgreSQL's bin directory (initdb, pg_ctl), if one is installed.
pg_bin() {
    local dir
    dir=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && echo "$dir"
}

ensure_postgres() {
    case "${MQ_TEST_DATABASE_URL:-}" in
    postgres://* | postgresql://*)
        echo "services.sh: MQ_TEST_DATABASE_URL names a PostgreSQL server: the tests use it" >&2
        return 0
        ;;
    esac
    pg_bin >/dev/null || apt_install postgresql
    pg_bin >/dev/null || die "no /usr/lib/postgresql/*/bin/initdb after installing 'postgresql'"
}

ensure_redis() {
    command -v redis-server >/dev/null || apt_install redis-server
    command -v redis-server >/dev/null || die "redis-server is still missing after installing it"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Exit 0 when the port on 127.0.0.1 accepts a connection and answers SEND with a reply starting EXPECT.
probe() {
    python3 - "$1" "$2" "$3" <<'EOF'
import socket, sys
port, send, expect = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3].encode()
try:
    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(send)
        sys.exit(0 if s.recv(64).startswith(expect) else 1)
except OSError:
    sys.exit(1)
EOF
}

# SO_REUSEADDR as servers set it, so connections in TIME_WAIT do not count as taken.
port_free() {
    python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1"
}

# Every port a start will use, checked before anything starts (the demo's processes are many:
# a clash found halfway left the first ones running). PIDFILE's process listening on its port
# is ours, started before: a second `make demo` finds its own services there.
ports_check() {
    [ $# -ge 1 ] || die "usage: ports-check NAME=PORT[:PIDFILE]..."
    python3 - "$@" <<'EOF'
import os, socket, sys

def listening_inodes(port):
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "0A":
                inodes.add(f"socket:[{f[9]}]")
    return inodes

def ours(port, pidfile):
    try:
        pid = int(open(pidfile).read().strip())
        fds = os.listdir(f"/proc/{pid}/fd")
    except (OSError, ValueError):
        return False
    inodes = listening_inodes(port)
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            pass
    return False

def free(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()

problems, seen = [], {}
for arg in sys.argv[1:]:
    name, _, rest = arg.partition("=")
    port_text, _, pidfile = rest.partition(":")
    port = int(port_text)
    if port in seen:
        other = seen[port]
        problems.append(f"{other} and {name} are both port {port}: run with another port for one "
                        f"of them ({other}=<free port> or {name}=<free port>)")
        continue
    seen[port] = name
    if not free(port) and not (pidfile and ours(port, pidfile)):
        problems.append(f"port {port} ({name}) is taken by another program: "
                        f"run with {name}=<free port>")
for problem in problems:
    print(f"services.sh: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
}

# What a start made, for undo_started: MQ_STARTED_LOG names the file, when the caller wants it.
log_started() {
    [ -n "${MQ_STARTED_LOG:-}" ] || return 0
    mkdir -p "$(dirname "$MQ_STARTED_LOG")"
    echo "$1 $2" >>"$MQ_STARTED_LOG"
}

# Stop what the starts logged to FILE started, newest first: a start that failed halfway
# leaves nothing of its own running (`make demo`).
undo_started() {
    [ $# -eq 1 ] || die "usage: undo-started FILE"
    [ -s "$1" ] || return 0
    local kind what
    while read -r kind what; do
        case "$kind" in
        zk) zk_stop "$what" ;;
        redis) redis_stop "$what" ;;
        proc) proc_stop "$what" ;;
        esac
    done < <(tac "$1")
    rm -f "$1"
}

# 'srvr', not 'ruok': a server answers 'imok' as soon as its port is open, before it serves
# sessions; 'srvr' says "not currently serving requests" until it does.
zk_ok() { probe "$1" srvr "Zookeeper version"; }
redis_ok() { probe "$1" $'PING\r\n' +PONG; }

# The pid in FILE when that process is alive and its command line contains MARK (guards pid reuse).
live_pid() {
    local file=$1 mark=$2 pid
    [ -s "$file" ] || return 1
    pid=$(cat "$file")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$mark" || return 1
    echo "$pid"
}

stop_pid() {
    local file=$1 mark=$2 what=$3 pid i
    if ! pid=$(live_pid "$file" "$mark"); then
        rm -f "$file"
        return 0
    fi
    kill "$pid"
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "services.sh: $what (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
    echo "stopped $what (pid $pid)"
}

show_log() {
    local f
    for f in "$@"; do
        [ -s "$f" ] && { echo "---- last lines of $f ----" >&2; tail -n 40 "$f" >&2; }
    done
    return 0
}

zk_start() {
    [ $# -eq 2 ] || die "usage: zk-start DIR PORT"
    local dir=$1 port=$2 pid i
    ensure_zookeeper
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    if pid=$(live_pid "$dir/zookeeper.pid" "$dir/zoo.cfg"); then
        zk_ok "$port" || die "ZooKeeper from $dir (pid $pid) runs but does not answer on port $port;" \
            "stop it with: scripts/services.sh zk-stop $dir"
        echo "ZooKeeper already running in $dir on 127.0.0.1:$port (pid $pid)"
        return 0
    fi
    port_free "$port" || die "port $port on 127.0.0.1 is taken by another process; pick another port"
    cat >"$dir/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,srvr,mntr
EOF
    zk_log4j "$dir"
    zk_launch "$dir"
    for ((i = 0; i < START_TIMEOUT * 5; i++)); do
        sleep 0.2
        pid=$(live_pid "$dir/zookeeper.pid" "$dir/zoo.cfg") || { [ $i -lt 5 ] && continue; break; }
        if zk_ok "$port"; then
            echo "ZooKeeper running in $dir on 127.0.0.1:$port (pid $pid)"
            log_started zk "$dir"
            return 0
        fi
    done
    show_log "$dir/zookeeper.out" "$dir/zookeeper.log"
    stop_pid "$dir/zookeeper.pid" "$dir/zoo.cfg" ZooKeeper
    die "ZooKeeper in $dir did not answer 'ruok' on 127.0.0.1:$port within ${START_TIMEOUT}s"
}

zk_stop() {
    [ $# -eq 1 ] || die "usage: zk-stop DIR"
    [ -d "$1" ] || return 0
    local dir
    dir=$(cd "$1" && pwd)
    stop_pid "$dir/zookeeper.pid" "$dir/zoo.cfg" ZooKeeper
}

zk_log4j() {
    cat >"$1/log4j.properties" <<EOF
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$1/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
EOF
}

# The serial collector is the smallest for the tests' few hundred MB; a heap of gigabytes (the
# benchmarks' trees of millions of znodes) it stops for seconds to collect, longer than a
# client's session waits for a ping, so such a heap gets G1, as a production ensemble has.
zk_gc() {
    local heap=${ZK_HEAP,,}
    if [[ $heap =~ ^[0-9]+g$ ]] || { [[ $heap =~ ^([0-9]+)m$ ]] && ((BASH_REMATCH[1] >= 1024)); }; then
        echo "-XX:+UseG1GC"
    else
        echo "-XX:+UseSerialGC"
    fi
}

# Start the server configured by DIR/zoo.cfg in the background, its pid in DIR/zookeeper.pid.
# setsid: the server outlives the shell that started it and ignores the terminal's Ctrl-C;
# the inner bash records its own pid before exec so the pid file names java itself.
zk_launch() {
    local dir=$1
    setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$dir/zookeeper.pid" \
        "$JAVA" -Xmx"$ZK_HEAP" -Xms32m "$(zk_gc)" \
        -cp "$dir:$ZK_JAR:$ZK_LOG_JARS" \
        -Dzookeeper.log.dir="$dir" \
        -Dlog4j.configuration="file:$dir/log4j.properties" \
        "$ZK_MAIN" "$dir/zoo.cfg" \
        </dev/null >"$dir/zookeeper.out" 2>&1 &
}

# The server's role from the 'srvr' four-letter word: leader, follower, standalone or nothing.
zk_mode() {
    python3 - "$1" <<'EOF'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1) as s:
        s.sendall(b"srvr")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
except OSError:
    sys.exit(0)
for line in data.decode(errors="replace").splitlines():
    if line.startswith("Mode:"):
        print(line.split(":", 1)[1].strip())
EOF
}

zk_ensemble_start() {
    [ $# -eq 1 ] || die "usage: zk-ensemble-start DIR"
    ensure_zookeeper
    local dir=$1 n i ports=() servers="" hosts="" node mode
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    for n in 1 2 3; do
        if live_pid "$dir/node$n/zookeeper.pid" "$dir/node$n/zoo.cfg" >/dev/null; then
            die "an ensemble already runs in $dir; stop it with: scripts/services.sh zk-ensemble-stop $dir"
        fi
    done
    # Each server needs three ports (client, quorum, election); free_port may hand out a port
    # again, so draw until nine differ.
    while [ ${#ports[@]} -lt 9 ]; do
        n=$(free_port)
        [[ " ${ports[*]} " == *" $n "* ]] || ports+=("$n")
    done
    for n in 1 2 3; do
        servers+="server.$n=127.0.0.1:${ports[3 * n - 2]}:${ports[3 * n - 1]}"$'\n'
        hosts+="${hosts:+,}127.0.0.1:${ports[3 * n - 3]}"
    done
    for n in 1 2 3; do
        node="$dir/node$n"
        mkdir -p "$node/data"
        echo "$n" >"$node/data/myid"
        cat >"$node/zoo.cfg" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$node/data
clientPort=${ports[3 * n - 3]}
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,srvr,mntr
$servers
EOF
        zk_log4j "$node"
        zk_launch "$node"
    done
    echo "$hosts" >"$dir/hosts"
    # An election among three fresh JVMs takes longer than one server's start.
    for ((i = 0; i < START_TIMEOUT * 10; i++)); do
        sleep 0.2
        mode=""
        for n in 1 2 3; do
            mode+="$(zk_mode "${ports[3 * n - 3]}") "
        done
        if [[ $mode == *leader* ]] && [ "$(grep -o follower <<<"$mode" | wc -l)" -eq 2 ]; then
            echo "ZooKeeper ensemble running in $dir ($mode)" >&2
            echo "$hosts"
            return 0
        fi
    done
    for n in 1 2 3; do show_log "$dir/node$n/zookeeper.out" "$dir/node$n/zookeeper.log"; done
    zk_ensemble_stop "$dir"
    die "the ZooKeeper ensemble in $dir elected no leader within $((START_TIMEOUT * 2))s"
}

zk_ensemble_stop() {
    [ $# -eq 1 ] || die "usage: zk-ensemble-stop DIR"
    [ -d "$1" ] || return 0
    local dir n
    dir=$(cd "$1" && pwd)
    for n in 1 2 3; do
        if [ -d "$dir/node$n" ]; then
            stop_pid "$dir/node$n/zookeeper.pid" "$dir/node$n/zoo.cfg" ZooKeeper
        fi
    done
    return 0
}

redis_start() {
    [ $# -eq 2 ] || die "usage: redis-start DIR PORT"
    local dir=$1 port=$2 pid i
    ensure_redis
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if pid=$(live_pid "$dir/redis.pid" redis-server); then
        redis_ok "$port" || die "Redis from $dir (pid $pid) runs but does not answer on port $port;" \
            "stop it with: scripts/services.sh redis-stop $dir"
        echo "Redis already running in $dir on 127.0.0.1:$port (pid $pid)"
        return 0
    fi
    port_free "$port" || die "port $port on 127.0.0.1 is taken by another process; pick another port"
    rm -f "$dir/redis.pid"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
        --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    for ((i = 0; i < START_TIMEOUT * 5; i++)); do
        if redis_ok "$port" && live_pid "$dir/redis.pid" redis-server >/dev/null; then
            echo "Redis running in $dir on 127.0.0.1:$port (pid $(cat "$dir/redis.pid"))"
            log_started redis "$dir"
            return 0
        fi
        sleep 0.2
    done
    show_log "$dir/redis.log"
    stop_pid "$dir/redis.pid" redis-server Redis
    die "Redis in $dir did not answer PING on 127.0.0.1:$port within ${START_TIMEOUT}s"
}

redis_stop() {
    [ $# -eq 1 ] || die "usage: redis-stop DIR"
    [ -d "$1" ] || return 0
    local dir
    dir=$(cd "$1" && pwd)
    stop_pid "$dir/redis.pid" redis-server Redis
}

# initdb and postgres refuse to run as root: as root, the cluster belongs to the postgres
# user that Debian's package creates. cd: runuser keeps the cwd, which that user may not read.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

pg_start() {
    [ $# -eq 2 ] || die "usage: pg-start DIR PORT"
    local dir=$1 port=$2 bin
    ensure_postgres
    bin=$(pg_bin)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null; then
        echo "PostgreSQL already running in $dir"
        return 0
    fi
    port_free "$port" || die "port $port on 127.0.0.1 is taken by another process; pick another port"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "there is no 'postgres' user to run PostgreSQL as (root may not)"
        chown postgres: "$dir"
        runuser -u postgres -- test -w "$dir" ||
            die "the postgres user cannot reach $dir: its parent directories must be traversable (o+x)"
    fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        # --no-sync and fsync=off below: a throw-away cluster need not survive a crash.
        as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --no-locale \
            --no-sync >"$dir/initdb.log" 2>&1 ||
            { show_log "$dir/initdb.log"; die "initdb failed in $dir/data"; }
    fi
    # The socket in DIR, not /var/run/postgresql: a system PostgreSQL may use the same port.
    if ! as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$START_TIMEOUT" \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off" \
        start >/dev/null; then
        show_log "$dir/postgres.log"
        pg_stop "$dir" >/dev/null 2>&1 || true
        die "PostgreSQL in $dir did not start on 127.0.0.1:$port within ${START_TIMEOUT}s"
    fi
    echo "PostgreSQL running in $dir on 127.0.0.1:$port (socket in $dir)"
}

pg_stop() {
    [ $# -eq 1 ] || die "usage: pg-stop DIR"
    [ -f "$1/data/postmaster.pid" ] || return 0
    local dir bin
    dir=$(cd "$1" && pwd)
    bin=$(pg_bin) || die "PostgreSQL's binaries are gone; stop the cluster in $dir by hand"
    # fast: roll back open sessions instead of waiting for them (a killed test leaves some).
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t "$START_TIMEOUT" stop >/dev/null
    echo "stopped PostgreSQL in $dir"
}

wait_http() {
    [ $# -ge 1 ] || die "usage: wait-http URL [SECONDS]"
    python3 - "$1" "${2:-$START_TIMEOUT}" <<'EOF'
import sys, time, urllib.request
url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
while True:
    try:
        urllib.request.urlopen(url, timeout=1)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(f"services.sh: {url} did not answer within {sys.argv[2]}s")
        time.sleep(0.3)
EOF
}

# Run CMD in its own session (so stopping it takes its children too), pid in PIDFILE, output in LOG.
proc_start() {
    [ $# -ge 3 ] || die "usage: proc-start PIDFILE LOG CMD [ARGS...]"
    local pidfile=$1 log=$2 pid i
    shift 2
    mkdir -p "$(dirname "$pidfile")" "$(dirname "$log")"
    if pid=$(live_pid "$pidfile" "$1"); then
        echo "$1 already running (pid $pid, $pidfile)"
        return 0
    fi
    setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidfile" "$@" </dev/null >>"$log" 2>&1 &
    for ((i = 0; i < 50; i++)); do
        [ -s "$pidfile" ] && break
        sleep 0.1
    done
    log_started proc "$pidfile"
    echo "started $* (pid $(cat "$pidfile"), log $log)"
}

# Stop the session started by proc-start: SIGTERM to its whole process group, then SIGKILL.
proc_stop() {
    [ $# -eq 1 ] || die "usage: proc-stop PIDFILE"
    local pidfile=$1 pid i
    pid=$(live_pid "$pidfile" "") || { rm -f "$pidfile"; return 0; }
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
    for ((i = 0; i < 100; i++)); do
        kill -0 -- "-$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$pidfile"
    echo "stopped pid $pid ($pidfile)"
}

# Start SERVICE (zk or redis) in DIR on a fresh free port, retrying if another run grabbed it first.
# Each attempt is a separate process so its `die` ends only that attempt.
start_on_free_port() {
    local service=$1 dir=$2 port attempt
    for attempt in 1 2 3; do
        port=$(free_port)
        if bash "$SELF" "$service-start" "$dir" "$port" >&2; then
            echo "$port"
            return 0
        fi
        echo "services.sh: $service on port $port failed (attempt $attempt), retrying" >&2
    done
    return 1
}

with_test_services() {
    [ $# -ge 1 ] || die "usage: with-test-services CMD [ARGS...]"
    ensure_zookeeper
    ensure_redis
    local tmp zk_port redis_port rc
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/mq-test.XXXXXX")
    # Traversable (not listable) by others: a PostgreSQL that a test starts as root runs as
    # the postgres user and keeps its cluster in a directory under here.
    chmod 711 "$tmp"
    # shellcheck disable=SC2064  # expand $tmp now: it is local to this function
    trap "cleanup_test_services '$tmp'" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    zk_port=$(start_on_free_port zk "$tmp/zookeeper") || die "could not start ZooKeeper"
    redis_port=$(start_on_free_port redis "$tmp/redis") || die "could not start Redis"
    export ZK_HOSTS="127.0.0.1:$zk_port"
    export REDIS_URL="redis://127.0.0.1:$redis_port/0"
    # The tests empty only this Redis freely (tests/redisdb.py): it is theirs to lose.
    export MQ_TEST_REDIS_URL="$REDIS_URL"
    export MQ_TEST_TMP="$tmp"
    export MQ_WORK_DIR="$tmp/work"
    if [ -n "${MQ_TEST_DATABASE_URL:-}" ]; then
        export DATABASE_URL="$MQ_TEST_DATABASE_URL"
    else
        unset DATABASE_URL
    fi
    mkdir -p "$MQ_WORK_DIR"
    rc=0
    "$@" || rc=$?
    return "$rc"
}

cleanup_test_services() {
    local tmp=$1
    zk_stop "$tmp/zookeeper" || true
    redis_stop "$tmp/redis" || true
    # A PostgreSQL cluster that a test started and could not stop (the test was killed).
    local cluster
    for cluster in "$tmp"/*/; do
        if [ -f "$cluster/data/postmaster.pid" ]; then
            pg_stop "$cluster" || true
        fi
    done
    rm -rf "$tmp" 2>/dev/null || { sleep 1; rm -rf "$tmp"; }
}

main() {
    local cmd=${1:-help}
    shift || true
    case "$cmd" in
    ensure-zookeeper) ensure_zookeeper ;;
    ensure-chromium) ensure_chromium ;;
    ensure-axe) ensure_axe ;;
    ensure-postgres) ensure_postgres ;;
    zk-start) zk_start "$@" ;;
    zk-stop) zk_stop "$@" ;;
    zk-ensemble-start) zk_ensemble_start "$@" ;;
    zk-ensemble-stop) zk_ensemble_stop "$@" ;;
    redis-start) redis_start "$@" ;;
    redis-stop) redis_stop "$@" ;;
    pg-start) pg_start "$@" ;;
    pg-stop) pg_stop "$@" ;;
    free-port) free_port ;;
    port-free) port_free "$@" ;;
    ports-check) ports_check "$@" ;;
    undo-started) undo_started "$@" ;;
    with-test-services) with_test_services "$@" ;;
    proc-start) proc_start "$@" ;;
    proc-stop) proc_stop "$@" ;;
    wait-http) wait_http "$@" ;;
    help | -h | --help) usage ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
}

main "$@"
