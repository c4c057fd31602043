#!/bin/bash
# A multi-host test cluster on one machine: N network namespaces ("hosts" h1..hN, each with its
# own hostname through a UTS namespace) joined by veth pairs to a bridge that lives in a namespace
# of its own, on the private subnet 10.77.0.0/24.  Links can be limited with tc tbf (netem is not
# available on these machines).  COMMAND runs inside h1 with:
#
#   CS_CLUSTER_HOSTFILE  an Open MPI hostfile listing the hosts (by address, SLOTS slots each)
#   CS_CLUSTER_MPI_ARGS  the mpirun options that launch through the namespaces
#                        (--mca plm_rsh_agent SCRIPT, TCP restricted to the test subnet; idle
#                        ranks yield, since all hosts share this machine's cores)
#
# usage: cluster.sh [-n N] [--slots S] [--rate RATE] [--slow HOST=RATE]... -- COMMAND [ARGS...]
#   --rate RATE       limit every host's link to RATE (tc syntax: 400mbit); default unlimited
#   --slow hK=RATE    limit host K's link to RATE instead
#   --second RATE     give every host a second interface eth1 on 10.78.0.0/24 (own bridge),
#                     limited to RATE ("" or 0: unlimited); MPI is still told to use eth1's subnet
#                     only if the command asks for it
#   --private DIR     every host mounts a small tmpfs of its own at DIR (node-local storage: what
#                     one host writes there, no other host sees)
# Everything it creates is removed on exit, also on failure or interruption.
# Exit: COMMAND's status; 77 when namespaces cannot be created here (not root, no support).
set -u
N=4 SLOTS=1 RATE="" SLOW=() SECOND="" PRIVATE=""
while [ $# -gt 0 ]; do
    case "$1" in
    -n) N=$2; shift 2 ;;
    --slots) SLOTS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --slow) SLOW+=("$2"); shift 2 ;;
    --second) SECOND=$2; shift 2 ;;
    --private) PRIVATE=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "cluster.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "cluster.sh: no command given" >&2; exit 2; }
if [ "$N" -lt 1 ] || [ "$N" -gt 200 ]; then echo "cluster.sh: -n must be 1..200" >&2; exit 2; fi

if [ "$(id -u)" -ne 0 ]; then echo "cluster.sh: SKIP: needs root for network namespaces" >&2; exit 77; fi
for t in ip tc unshare; do
    command -v $t >/dev/null || { echo "cluster.sh: SKIP: $t not found" >&2; exit 77; }
done

P="cs$$"                       # unique prefix: several clusters may run at once
WORK=$(mktemp -d "/tmp/${P}.XXXXXX")
created=()

cleanup() {
    local ns
    for ns in "${created[@]}"; do
        # Processes still in our namespaces are ones this script started (mpirun, orted, ranks).
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkns() {
    ip netns add "$1" || { echo "cluster.sh: SKIP: cannot create network namespace $1" >&2; exit 77; }
    created+=("$1")
    ip -n "$1" link set lo up
}

rate_of() {  # the rate of host $1, "" for unlimited
    local s
    for s in "${SLOW[@]+"${SLOW[@]}"}"; do
        [ "${s%%=*}" = "$1" ] && { echo "${s#*=}"; return; }
    done
    echo "$RATE"
}

limit() {  # limit egress of device $2 in namespace $1 to rate $3
    [ -n "$3" ] || return 0
    tc -n "$1" qdisc add dev "$2" root tbf rate "$3" burst 256kb latency 100ms || {
        echo "cluster.sh: tc tbf failed on $2 in $1" >&2; exit 1; }
}

mkns "$P-br"
ip -n "$P-br" link add br0 type bridge || { echo "cluster.sh: SKIP: no bridge support" >&2; exit 77; }
ip -n "$P-br" link set br0 up
: > "$WORK/hostfile"
for i in $(seq 1 "$N"); do
    ns="$P-h$i"
    mkns "$ns"
    ip -n "$P-br" link add "v$i" type veth peer name eth0 netns "$ns" ||
        { echo "cluster.sh: SKIP: cannot create veth pairs" >&2; exit 77; }
    ip -n "$P-br" link set "v$i" master br0 up
    ip -n "$ns" addr add "10.77.0.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    r=$(rate_of "h$i")
    limit "$ns" eth0 "$r"       # host -> bridge
    limit "$P-br" "v$i" "$r"    # bridge -> host
    echo "10.77.0.$i slots=$SLOTS" >> "$WORK/hostfile"
    if [ -n "$SECOND" ]; then
        [ "$i" -eq 1 ] && { ip -n "$P-br" link add br1 type bridge && ip -n "$P-br" link set br1 up; }
        ip -n "$P-br" link add "w$i" type veth peer name eth1 netns "$ns" ||
            { echo "cluster.sh: SKIP: cannot create veth pairs" >&2; exit 77; }
        ip -n "$P-br" link set "w$i" master br1 up
        ip -n "$ns" addr add "10.78.0.$i/24" dev eth1
        ip -n "$ns" link set eth1 up
        [ "$SECOND" = 0 ] || { limit "$ns" eth1 "$SECOND"; limit "$P-br" "w$i" "$SECOND"; }
    fi
done

# mpirun's remote shell: "agent HOST COMMAND..." runs COMMAND in HOST's namespace under its name.
cat > "$WORK/agent" <<AGENT
#!/bin/sh
host=\$1; shift
i=\${host##*.}
[ -z "$PRIVATE" ] || exec ip netns exec "$P-h\$i" unshare --uts --mount sh -c \
    "hostname h\$i; mount -t tmpfs -o size=512m cs-node '$PRIVATE' && exec \$*"
exec ip netns exec "$P-h\$i" unshare --uts sh -c "hostname h\$i; exec \$*"
AGENT
chmod +x "$WORK/agent"

export CS_CLUSTER_HOSTFILE="$WORK/hostfile"
export CS_CLUSTER_MPI_ARGS="--hostfile $WORK/hostfile --mca plm_rsh_agent $WORK/agent \
--mca plm_rsh_no_tree_spawn 1 --mca btl tcp,vader,self --mca btl_tcp_if_include 10.77.0.0/24 \
--mca oob_tcp_if_include 10.77.0.0/24 --mca mpi_yield_when_idle 1"
if [ -n "$PRIVATE" ]; then
    mkdir -p "$PRIVATE" || exit 1
    ip netns exec "$P-h1" unshare --uts --mount sh -c \
        'hostname h1; mount -t tmpfs -o size=512m cs-node "$0" && exec "$@"' "$PRIVATE" "$@"
    exit $?
fi
ip netns exec "$P-h1" unshare --uts sh -c 'hostname h1; exec "$@"' sh "$@"
