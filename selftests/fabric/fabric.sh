#!/usr/bin/env bash
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
#
# mrc veth fabric emulator. Sourced as a library (functions fabric_*) or run
# as a CLI:
#
#   fabric.sh up [direct|clos] [key=value ...] [--file TOPOFILE]   prints the run id
#   fabric.sh down RUN|--all           tear a run down (also after a crash)
#   fabric.sh show RUN [--json]        what a run created
#   fabric.sh list                     runs found on this machine
#   fabric.sh exec RUN HOST CMD...     run CMD in a host (or router) namespace
#   fabric.sh state RUN                path of the run's state file
#   fabric.sh link RUN LINK down|up
#   fabric.sh flap RUN LINK PERIOD DURATION   (background; seconds, decimals ok)
#   fabric.sh shape RUN LINK RATE [fwd|rev|both] [burst=B] [latency=L]
#   fabric.sh unshape RUN LINK [fwd|rev|both]
#   fabric.sh plane RUN P down|up|blackhole|heal|shape RATE|loss PCT
#   fabric.sh fault RUN ARGS...        mrc_fault with --state filled in
#   fabric.sh mptcp RUN CLIENT SERVER  MPTCP endpoints + limits, one subflow per plane
#
# Documentation/fabric.md describes topologies, names, the state file and
# every command. Addresses are only in 198.18.0.0/15 and fd00::/8; nothing is
# created in the calling namespace: every interface lives in a namespace of
# the run, and every name carries the run id.

FABRIC_ROOT=${FABRIC_ROOT:-/run/mrc-fabric}
FABRIC_BPFFS=${FABRIC_BPFFS:-/sys/fs/bpf}
FABRIC_NS_PREFIX=mrcf
FABRIC_SELF=$(readlink -f "${BASH_SOURCE[0]}")

fabric_err() { echo "fabric: $*" >&2; }

# The mrc_fault binary: $MRC_FAULT, else next to a build dir, else PATH.
fabric_fault_bin() {
	if [ -n "${MRC_FAULT:-}" ]; then
		echo "$MRC_FAULT"
	elif [ -n "${MRC_BUILD_DIR:-}" ] && [ -x "$MRC_BUILD_DIR/selftests/fabric/mrc_fault" ]; then
		echo "$MRC_BUILD_DIR/selftests/fabric/mrc_fault"
	else
		command -v mrc_fault || { fabric_err "mrc_fault not found (set MRC_FAULT or MRC_BUILD_DIR)"; return 1; }
	fi
}

fabric_new_run_id() {
	local id
	id=$(tr -dc 'a-z0-9' </dev/urandom | head -c 5)
	echo "r$id"
}

fabric_dir() { echo "$FABRIC_ROOT/$1"; }
fabric_state() { echo "$FABRIC_ROOT/$1/state.json"; }

# jq on a run's state file.
fabric_q() {
	local run=$1
	shift
	jq -r "$@" "$(fabric_state "$run")"
}

fabric_ns() { # RUN NODE -> namespace name
	echo "$FABRIC_NS_PREFIX-$1-$2"
}

fabric_ensure_bpffs() {
	if ! mount | grep -q " on $FABRIC_BPFFS type bpf"; then
		mkdir -p "$FABRIC_BPFFS"
		mount -t bpf bpf "$FABRIC_BPFFS" || return 1
	fi
}

# -------------------------------------------------------------------------
# Topology construction
#
# Parameters (key=value): planes, leaves, spines, hosts, mtu, mtus (per plane,
# comma-separated, plane 0 first; planes past the list get mtu), shape (tbf rate
# on every host port, e.g. 1gbit), burst, latency, ipv6 (on|off), run (id),
# mptcp (CLIENT:SERVER, e.g. A:B), ecmp (on|off, direct: an address per host
# reached over every plane).

_fabric_plane_mtu() { # plane -> MTU of its links (mtus=, else mtu=)
	local m
	IFS=, read -ra m <<<"$_F_MTUS"
	echo "${m[$1]:-$_F_MTU}"
}

_fabric_mac() { # index -> MAC, unique per run
	printf '02:%s:00:%02x:%02x' "$_F_MACPFX" $(($1 >> 8 & 255)) $(($1 & 255))
}

_fabric_reset() {
	_F_NS=()
	_F_NSROLE=()
	_F_LINKS_JSON=()
	_F_PORTS_JSON=()
	_F_IDX=0
	declare -gA _F_BATCH=()
	declare -gA _F_CREATE=()
	declare -gA _F_ROUTES=()
	declare -gA _F_TC=()
	_F_WIRE_NODE=""
	_F_LINK_KIND=fabric
}

_fabric_add_ns() { # node role
	_F_NS+=("$1")
	_F_NSROLE+=("$2")
}

# Queue commands for a node's configuration batch (replayed on link up).
_fabric_cfg() { # node cmd...
	_F_BATCH[$1]+="$2"$'\n'
}

# Routes go after every address of the node (its batch is replayed in order).
_fabric_route() { # node cmd...
	_F_ROUTES[$1]+="$2"$'\n'
}

# _fabric_link NAME PLANE NODE_A IF_A ADDR4_A ADDR6_A NODE_B IF_B ADDR4_B ADDR6_B PLEN4 PLEN6
# Creates a veth pair (queued), addresses, static neighbours both ways.
_fabric_link() {
	local name=$1 plane=$2 na=$3 ia=$4 a4=$5 a6=$6 nb=$7 ib=$8 b4=$9 b6=${10} p4=${11} p6=${12}
	local ma mb
	_F_IDX=$((_F_IDX + 1))
	if [ -n "${_F_WIRE_NODE:-}" ]; then
		_fabric_wired_link "$@"
		return
	fi
	ma=$(_fabric_mac $((_F_IDX * 2)))
	mb=$(_fabric_mac $((_F_IDX * 2 + 1)))
	local nsa nsb
	nsa=$(fabric_ns "$_F_RUN" "$na")
	nsb=$(fabric_ns "$_F_RUN" "$nb")
	local mtu
	mtu=$(_fabric_plane_mtu "$plane")
	_F_CREATE[$na]+="link add $ia mtu $mtu address $ma type veth peer name $ib netns $nsb mtu $mtu address $mb"$'\n'
	_fabric_cfg "$na" "link set dev $ia up"
	_fabric_cfg "$nb" "link set dev $ib up"
	_fabric_cfg "$na" "addr replace $a4/$p4 dev $ia"
	_fabric_cfg "$nb" "addr replace $b4/$p4 dev $ib"
	_fabric_cfg "$na" "neigh replace $b4 lladdr $mb dev $ia nud permanent"
	_fabric_cfg "$nb" "neigh replace $a4 lladdr $ma dev $ib nud permanent"
	if [ "$_F_V6" = on ]; then
		_fabric_cfg "$na" "addr replace $a6/$p6 dev $ia nodad"
		_fabric_cfg "$nb" "addr replace $b6/$p6 dev $ib nodad"
		_fabric_cfg "$na" "neigh replace $b6 lladdr $mb dev $ia nud permanent"
		_fabric_cfg "$nb" "neigh replace $a6 lladdr $ma dev $ib nud permanent"
	fi
	# Fault points: where a fault on a->b (fwd) / b->a (rev) traffic attaches
	# so that it also sees AF_XDP and XDP traffic (see Documentation/fabric.md).
	local ffwd frev
	case "$_F_LINK_KIND" in
	host) # a = host, b = router: work on the router side
		ffwd=$(printf '{"ns":"%s","ifname":"%s","hook":"ingress"}' "$nsb" "$ib")
		frev=$(printf '{"ns":"%s","ifname":"%s","hook":"egress"}' "$nsb" "$ib") ;;
	*)
		ffwd=$(printf '{"ns":"%s","ifname":"%s","hook":"egress"}' "$nsa" "$ia")
		frev=$(printf '{"ns":"%s","ifname":"%s","hook":"egress"}' "$nsb" "$ib") ;;
	esac
	_F_LINKS_JSON+=("$(printf '{"name":"%s","plane":%d,"a":{"node":"%s","ns":"%s","ifname":"%s","mac":"%s","ipv4":"%s","ipv6":"%s"},"b":{"node":"%s","ns":"%s","ifname":"%s","mac":"%s","ipv4":"%s","ipv6":"%s"},"fault":{"fwd":%s,"rev":%s}}' \
		"$name" "$plane" "$na" "$nsa" "$ia" "$ma" "$a4" "$a6" "$nb" "$nsb" "$ib" "$mb" "$b4" "$b6" "$ffwd" "$frev")")
	_F_LAST_MA=$ma
	_F_LAST_MB=$mb
}

# Host port record: host plane ifname mac ipv4 plen4 ipv6 plen6 gw4 gw6 gwmac link
_fabric_port() {
	local v6=$6 gw6=${9}
	[ "$_F_V6" = on ] || { v6=""; gw6=""; }
	_F_PORTS_JSON+=("$1|$(printf '{"plane":%d,"ifname":"%s","mac":"%s","ipv4":"%s","prefix4":%d,"ipv6":"%s","prefix6":%d,"nexthop4":"%s","nexthop6":"%s","nexthop_mac":"%s","link":"%s"}' \
		"$2" "$3" "$4" "$5" "${10}" "$v6" "${11}" "$8" "$gw6" "${12}" "${13}")")
}

_fabric_host_letter() { # index -> A, B, ...
	printf "\\x$(printf '%x' $((65 + $1)))"
}

# A direct plane link through the wire namespace W:
#   A:aP <-veth-> W:wPa ==mirred== W:wPb <-veth-> B:bP
# Hosts see one L2 segment (B's MAC is A's neighbour). Faults and shaping sit
# on W's egress, which every packet crosses, AF_XDP and XDP_TX included.
_fabric_wired_link() {
	local name=$1 plane=$2 na=$3 ia=$4 a4=$5 a6=$6 nb=$7 ib=$8 b4=$9 b6=${10} p4=${11} p6=${12}
	local w=$_F_WIRE_NODE ma mb wa wb nsa nsb nsw
	ma=$(_fabric_mac $((_F_IDX * 2)))
	mb=$(_fabric_mac $((_F_IDX * 2 + 1)))
	nsa=$(fabric_ns "$_F_RUN" "$na")
	nsb=$(fabric_ns "$_F_RUN" "$nb")
	nsw=$(fabric_ns "$_F_RUN" "$w")
	wa="w${plane}a-$_F_RUN"
	wb="w${plane}b-$_F_RUN"
	local mtu
	mtu=$(_fabric_plane_mtu "$plane")
	_F_CREATE[$na]+="link add $ia mtu $mtu address $ma type veth peer name $wa netns $nsw mtu $mtu"$'\n'
	_F_CREATE[$nb]+="link add $ib mtu $mtu address $mb type veth peer name $wb netns $nsw mtu $mtu"$'\n'
	_fabric_cfg "$w" "link set dev $wa up"
	_fabric_cfg "$w" "link set dev $wb up"
	_F_TC[$w]+="qdisc add dev $wa clsact"$'\n'"qdisc add dev $wb clsact"$'\n'
	_F_TC[$w]+="filter add dev $wa ingress pref 10 protocol all u32 match u32 0 0 action mirred egress redirect dev $wb"$'\n'
	_F_TC[$w]+="filter add dev $wb ingress pref 10 protocol all u32 match u32 0 0 action mirred egress redirect dev $wa"$'\n'
	_fabric_cfg "$na" "link set dev $ia up"
	_fabric_cfg "$nb" "link set dev $ib up"
	_fabric_cfg "$na" "addr replace $a4/$p4 dev $ia"
	_fabric_cfg "$nb" "addr replace $b4/$p4 dev $ib"
	_fabric_cfg "$na" "neigh replace $b4 lladdr $mb dev $ia nud permanent"
	_fabric_cfg "$nb" "neigh replace $a4 lladdr $ma dev $ib nud permanent"
	if [ "$_F_V6" = on ]; then
		_fabric_cfg "$na" "addr replace $a6/$p6 dev $ia nodad"
		_fabric_cfg "$nb" "addr replace $b6/$p6 dev $ib nodad"
		_fabric_cfg "$na" "neigh replace $b6 lladdr $mb dev $ia nud permanent"
		_fabric_cfg "$nb" "neigh replace $a6 lladdr $ma dev $ib nud permanent"
	fi
	_F_LINKS_JSON+=("$(printf '{"name":"%s","plane":%d,"a":{"node":"%s","ns":"%s","ifname":"%s","mac":"%s","ipv4":"%s","ipv6":"%s"},"b":{"node":"%s","ns":"%s","ifname":"%s","mac":"%s","ipv4":"%s","ipv6":"%s"},"wire":{"node":"%s","ns":"%s","a":"%s","b":"%s"},"fault":{"fwd":{"ns":"%s","ifname":"%s","hook":"egress"},"rev":{"ns":"%s","ifname":"%s","hook":"egress"}}}' \
		"$name" "$plane" "$na" "$nsa" "$ia" "$ma" "$a4" "$a6" "$nb" "$nsb" "$ib" "$mb" "$b4" "$b6" "$w" "$nsw" "$wa" "$wb" "$nsw" "$wb" "$nsw" "$wa")")
	_F_LAST_MA=$ma
	_F_LAST_MB=$mb
}

_fabric_build_direct() {
	local p ia ib
	for n in A B; do _fabric_add_ns "$n" host; done
	if [ "$_F_WIRE" = on ]; then
		_fabric_add_ns W wire
		_F_WIRE_NODE=W
	fi
	for ((p = 0; p < _F_PLANES; p++)); do
		ia="a$p-$_F_RUN"
		ib="b$p-$_F_RUN"
		_fabric_link "p$p" "$p" A "$ia" "198.18.$p.1" "fd00:0:0:$p::1" B "$ib" "198.18.$p.2" "fd00:0:0:$p::2" 24 64
		_fabric_port A "$p" "$ia" "$_F_LAST_MA" "198.18.$p.1" "fd00:0:0:$p::1" "" "198.18.$p.2" "fd00:0:0:$p::2" 24 64 "$_F_LAST_MB" "p$p"
		_fabric_port B "$p" "$ib" "$_F_LAST_MB" "198.18.$p.2" "fd00:0:0:$p::2" "" "198.18.$p.1" "fd00:0:0:$p::1" 24 64 "$_F_LAST_MA" "p$p"
	done
	[ "$_F_ECMP" = on ] && _fabric_ecmp_direct
	return 0
}

# ecmp=on (direct): each host gets an address on lo (A 198.19.255.1/32 and
# fd00:ff::1/128, B .2 and ::2) and reaches the other's through one route
# with a nexthop per plane, its own ECMP address as source. The namespaces
# hash on L4 (fib_multipath_hash_policy=1), so the 5-tuple picks the plane in
# each direction: plain TCP flows spread over the planes like flows over an
# ECMP fabric. `ip route get ADDR from SRC ipproto tcp sport S dport D` in a
# host shows the plane a flow takes.
_fabric_ecmp_addr4() { echo "198.19.255.$1"; }
_fabric_ecmp_addr6() { echo "fd00:ff::$1"; }
_fabric_ecmp_direct() {
	local me mi pi p nh4 nh6
	for me in A B; do
		if [ $me = A ]; then mi=1 pi=2; else mi=2 pi=1; fi
		nh4="" nh6=""
		for ((p = 0; p < _F_PLANES; p++)); do
			nh4+=" nexthop via 198.18.$p.$pi dev ${me,,}$p-$_F_RUN weight 1"
			nh6+=" nexthop via fd00:0:0:$p::$pi dev ${me,,}$p-$_F_RUN weight 1"
		done
		_fabric_cfg "$me" "addr replace $(_fabric_ecmp_addr4 $mi)/32 dev lo"
		_fabric_route "$me" "route replace $(_fabric_ecmp_addr4 $pi)/32 src $(_fabric_ecmp_addr4 $mi)$nh4"
		if [ "$_F_V6" = on ]; then
			_fabric_cfg "$me" "addr replace $(_fabric_ecmp_addr6 $mi)/128 dev lo nodad"
			_fabric_route "$me" "route replace $(_fabric_ecmp_addr6 $pi)/128 src $(_fabric_ecmp_addr6 $mi)$nh6"
		fi
	done
}

# clos: per plane p, leaves l and spines s. Host h hangs off leaf h % L.
#   host link (p,h):    198.18.p.(4h+1)/30 host, .(4h+2) leaf; fd00:0:0:p::(4h+1)/126
#   leaf-spine (p,l,s): 198.19.p.(4(8l+s)+1)/30 leaf, +2 spine; fd00:1:p:(8l+s)::1/64, ::2
_fabric_build_clos() {
	local p l s h x node leaf idx hb h4 l4 h6 l6 a4 b4 a6 b6
	for ((h = 0; h < _F_HOSTS; h++)); do _fabric_add_ns "$(_fabric_host_letter $h)" host; done
	for ((p = 0; p < _F_PLANES; p++)); do
		for ((l = 0; l < _F_LEAVES; l++)); do _fabric_add_ns "p${p}l$l" leaf; done
		for ((s = 0; s < _F_SPINES; s++)); do _fabric_add_ns "p${p}s$s" spine; done
		for ((h = 0; h < _F_HOSTS; h++)); do
			node=$(_fabric_host_letter $h)
			x=${node,,}
			l=$((h % _F_LEAVES))
			leaf="p${p}l$l"
			hb=$((4 * h))
			h4="198.18.$p.$((hb + 1))"
			l4="198.18.$p.$((hb + 2))"
			h6="fd00:0:0:$p::$(printf '%x' $((hb + 1)))"
			l6="fd00:0:0:$p::$(printf '%x' $((hb + 2)))"
			_F_LINK_KIND=host
			_fabric_link "p$p-$x" "$p" "$node" "$x$p-$_F_RUN" "$h4" "$h6" "$leaf" "p${p}l$l$x-$_F_RUN" "$l4" "$l6" 30 126
			_fabric_port "$node" "$p" "$x$p-$_F_RUN" "$_F_LAST_MA" "$h4" "$h6" "" "$l4" "$l6" 30 126 "$_F_LAST_MB" "p$p-$x"
			_fabric_route "$node" "route replace 198.18.$p.0/24 via $l4 dev $x$p-$_F_RUN"
			[ "$_F_V6" = on ] && _fabric_route "$node" "route replace fd00:0:0:$p::/64 via $l6 dev $x$p-$_F_RUN"
			# every spine reaches this host through its leaf
			for ((s = 0; s < _F_SPINES; s++)); do
				idx=$((8 * l + s))
				_fabric_route "p${p}s$s" "route replace 198.18.$p.$hb/30 via 198.19.$p.$((4 * idx + 1)) dev p${p}s${s}l$l-$_F_RUN"
				[ "$_F_V6" = on ] && _fabric_route "p${p}s$s" "route replace fd00:0:0:$p::$(printf '%x' $hb)/126 via fd00:1:$p:$(printf '%x' $idx)::1 dev p${p}s${s}l$l-$_F_RUN"
			done
		done
		for ((l = 0; l < _F_LEAVES; l++)); do
			local nh4="" nh6=""
			for ((s = 0; s < _F_SPINES; s++)); do
				idx=$((8 * l + s))
				a4="198.19.$p.$((4 * idx + 1))"
				b4="198.19.$p.$((4 * idx + 2))"
				a6="fd00:1:$p:$(printf '%x' $idx)::1"
				b6="fd00:1:$p:$(printf '%x' $idx)::2"
				_F_LINK_KIND=fabric
				_fabric_link "p$p-l$l-s$s" "$p" "p${p}l$l" "p${p}l${l}s$s-$_F_RUN" "$a4" "$a6" "p${p}s$s" "p${p}s${s}l$l-$_F_RUN" "$b4" "$b6" 30 64
				nh4+=" nexthop via $b4 dev p${p}l${l}s$s-$_F_RUN weight 1"
				nh6+=" nexthop via $b6 dev p${p}l${l}s$s-$_F_RUN weight 1"
			done
			# remote hosts of the plane: ECMP over all spines (connected /30s win locally)
			_fabric_route "p${p}l$l" "route replace 198.18.$p.0/24$nh4"
			[ "$_F_V6" = on ] && _fabric_route "p${p}l$l" "route replace fd00:0:0:$p::/64$nh6"
		done
	done
}

_fabric_parse_params() { # key=value...
	local kv k v
	for kv in "$@"; do
		case "$kv" in
		direct | clos) _F_TOPO=$kv; continue ;;
		*=*) ;;
		*) fabric_err "bad parameter '$kv' (want key=value)"; return 2 ;;
		esac
		k=${kv%%=*}
		v=${kv#*=}
		case "$k" in
		topology) _F_TOPO=$v ;;
		planes) _F_PLANES=$v ;;
		leaves) _F_LEAVES=$v ;;
		spines) _F_SPINES=$v ;;
		hosts) _F_HOSTS=$v ;;
		mtu) _F_MTU=$v ;;
		mtus) _F_MTUS=$v ;;
		shape) _F_SHAPE=$v ;;
		burst) _F_BURST=$v ;;
		latency) _F_LATENCY=$v ;;
		ipv6) _F_V6=$v ;;
		run) _F_RUN=$v ;;
		mptcp) _F_MPTCP=$v ;;
		wire) _F_WIRE=$v ;;
		offload) _F_OFFLOAD=$v ;;
		xdp_pass) _F_XDPPASS=$v ;;
		ecmp) _F_ECMP=$v ;;
		*) fabric_err "unknown parameter '$k'"; return 2 ;;
		esac
	done
}

# Topology file: '#' comments, lines "topology KIND key=value..." or "key=value"
# (or "key value"). The scenario runner's topology line uses the same words.
_fabric_read_file() {
	local f=$1 line n=0 words
	while IFS= read -r line || [ -n "$line" ]; do
		n=$((n + 1))
		line=${line%%#*}
		read -ra words <<<"$line"
		[ ${#words[@]} -eq 0 ] && continue
		if [ "${words[0]}" = topology ]; then
			words=("${words[@]:1}")
		elif [ ${#words[@]} -eq 2 ] && [[ ${words[0]} != *=* ]]; then
			words=("${words[0]}=${words[1]}")
		fi
		_fabric_parse_params "${words[@]}" || { fabric_err "$f:$n: in '$line'"; return 2; }
	done <"$f"
}

_fabric_validate() {
	local re='^[0-9]+$'
	case "$_F_TOPO" in direct | clos) ;; *) fabric_err "topology must be direct or clos, not '$_F_TOPO'"; return 2 ;; esac
	for v in "$_F_PLANES" "$_F_LEAVES" "$_F_SPINES" "$_F_HOSTS" "$_F_MTU"; do
		[[ $v =~ $re ]] || { fabric_err "numeric parameter expected, got '$v'"; return 2; }
	done
	[[ $_F_RUN =~ ^[a-z][a-z0-9]{1,5}$ ]] || { fabric_err "run id must match [a-z][a-z0-9]{1,5}: '$_F_RUN'"; return 2; }
	((_F_PLANES >= 1 && _F_PLANES <= 16)) || { fabric_err "planes must be 1..16"; return 2; }
	((_F_MTU >= 1280 && _F_MTU <= 65535)) || { fabric_err "mtu must be 1280..65535"; return 2; }
	if [ -n "$_F_MTUS" ]; then
		local m
		IFS=, read -ra m <<<"$_F_MTUS"
		((${#m[@]} <= _F_PLANES)) || { fabric_err "mtus lists more MTUs than there are planes"; return 2; }
		for v in "${m[@]}"; do
			[[ $v =~ $re ]] && ((v >= 1280 && v <= 65535)) || { fabric_err "mtus: each MTU must be 1280..65535, not '$v'"; return 2; }
		done
	fi
	if [ "$_F_TOPO" = clos ]; then
		((_F_LEAVES >= 1 && _F_LEAVES <= 8)) || { fabric_err "leaves must be 1..8"; return 2; }
		((_F_SPINES >= 1 && _F_SPINES <= 8)) || { fabric_err "spines must be 1..8"; return 2; }
		((_F_HOSTS >= 2 && _F_HOSTS <= 26)) || { fabric_err "hosts must be 2..26"; return 2; }
	fi
	case "$_F_V6" in on | off) ;; *) fabric_err "ipv6 must be on or off"; return 2 ;; esac
	case "$_F_WIRE" in on | off) ;; *) fabric_err "wire must be on or off"; return 2 ;; esac
	case "$_F_OFFLOAD" in on | off) ;; *) fabric_err "offload must be on or off"; return 2 ;; esac
	case "$_F_XDPPASS" in on | off) ;; *) fabric_err "xdp_pass must be on or off"; return 2 ;; esac
	case "$_F_ECMP" in on | off) ;; *) fabric_err "ecmp must be on or off"; return 2 ;; esac
	if [ "$_F_ECMP" = on ] && [ "$_F_TOPO" != direct ]; then
		fabric_err "ecmp=on is for the direct topology (a clos plane routes only its own addresses)"
		return 2
	fi
	if [ -d "$(fabric_dir "$_F_RUN")" ] || ip netns list | grep -q "^$FABRIC_NS_PREFIX-$_F_RUN-"; then
		fabric_err "run id $_F_RUN is in use"
		return 2
	fi
}

_fabric_write_state() {
	local st dir i first node role nsn ports
	dir=$(fabric_dir "$_F_RUN")
	st=$(fabric_state "$_F_RUN")
	{
		printf '{\n  "version": 1,\n  "run": "%s",\n  "topology": "%s",\n' "$_F_RUN" "$_F_TOPO"
		printf '  "planes": %d,\n  "leaves": %d,\n  "spines": %d,\n  "mtu": %d,\n' "$_F_PLANES" \
			"$([ "$_F_TOPO" = clos ] && echo "$_F_LEAVES" || echo 0)" "$([ "$_F_TOPO" = clos ] && echo "$_F_SPINES" || echo 0)" "$_F_MTU"
		printf '  "mtus": [%s],\n' "$(for ((i = 0; i < _F_PLANES; i++)); do printf '%s%d' "$([ "$i" = 0 ] || echo ,)" "$(_fabric_plane_mtu "$i")"; done)"
		printf '  "ipv6": %s,\n  "shape": "%s",\n  "wire": %s,\n  "offload": %s,\n' "$([ "$_F_V6" = on ] && echo true || echo false)" "$_F_SHAPE" \
			"$([ "$_F_TOPO" = direct ] && [ "$_F_WIRE" = on ] && echo true || echo false)" "$([ "$_F_OFFLOAD" = on ] && echo true || echo false)"
		printf '  "xdp_pass": %s,\n' "$([ "$_F_XDPPASS" = on ] && echo true || echo false)"
		printf '  "ecmp": %s,\n' "$([ "$_F_ECMP" = on ] && echo true || echo false)"
		# TCP congestion control the hosts inherit (tcp_peer --cc overrides per socket)
		printf '  "tcp_cc": "%s",\n' "$(cat /proc/sys/net/ipv4/tcp_congestion_control)"
		printf '  "dir": "%s",\n  "bpffs": "%s",\n  "created": %s,\n' "$dir" "$FABRIC_BPFFS/mrc-fabric/$_F_RUN" "$(date +%s)"
		printf '  "namespaces": [\n'
		first=1
		for i in "${!_F_NS[@]}"; do
			[ $first = 1 ] || printf ',\n'
			first=0
			printf '    {"node": "%s", "ns": "%s", "role": "%s"}' "${_F_NS[$i]}" "$(fabric_ns "$_F_RUN" "${_F_NS[$i]}")" "${_F_NSROLE[$i]}"
		done
		printf '\n  ],\n  "hosts": {\n'
		first=1
		for i in "${!_F_NS[@]}"; do
			[ "${_F_NSROLE[$i]}" = host ] || continue
			node=${_F_NS[$i]}
			[ $first = 1 ] || printf ',\n'
			first=0
			ports=""
			for rec in "${_F_PORTS_JSON[@]}"; do
				[ "${rec%%|*}" = "$node" ] || continue
				[ -n "$ports" ] && ports+=$',\n'
				ports+="        ${rec#*|}"
			done
			local e4="" e6=""
			if [ "$_F_ECMP" = on ]; then
				e4=$(_fabric_ecmp_addr4 $((i + 1)))
				[ "$_F_V6" = on ] && e6=$(_fabric_ecmp_addr6 $((i + 1)))
			fi
			printf '    "%s": {\n      "ns": "%s",\n      "ecmp_ipv4": "%s",\n      "ecmp_ipv6": "%s",\n      "ports": [\n%s\n      ]\n    }' \
				"$node" "$(fabric_ns "$_F_RUN" "$node")" "$e4" "$e6" "$ports"
		done
		printf '\n  },\n  "links": [\n'
		first=1
		for rec in "${_F_LINKS_JSON[@]}"; do
			[ $first = 1 ] || printf ',\n'
			first=0
			printf '    %s' "$rec"
		done
		printf '\n  ]\n}\n'
	} >"$st.tmp"
	jq . "$st.tmp" >/dev/null || { fabric_err "internal error: state file is not JSON ($st.tmp)"; return 1; }
	mv "$st.tmp" "$st"
}

# The XDP_PASS object (selftests/fabric/fabric_pass.bpf.c): $FABRIC_XDP_PASS,
# else the build dir's bpf/, else next to mrc_fault's build dir, else compiled
# here with clang into $FABRIC_ROOT (a build configured before it existed).
fabric_pass_obj() {
	local f src out
	for f in "${FABRIC_XDP_PASS:-}" "${MRC_BUILD_DIR:+$MRC_BUILD_DIR/bpf/fabric_pass.bpf.o}"; do
		[ -n "$f" ] && [ -f "$f" ] && { echo "$f"; return 0; }
	done
	f=$(fabric_fault_bin 2>/dev/null) && f=$(dirname "$(readlink -f "$f")")/../../bpf/fabric_pass.bpf.o &&
		[ -f "$f" ] && { readlink -f "$f"; return 0; }
	src=$(dirname "$FABRIC_SELF")/fabric_pass.bpf.c
	out=$FABRIC_ROOT/.fabric_pass.bpf.o
	if [ -f "$out" ] && [ "$out" -nt "$src" ]; then echo "$out"; return 0; fi
	if command -v clang >/dev/null && mkdir -p "$FABRIC_ROOT" &&
		clang -target bpf -O2 -g -I"/usr/include/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)" \
			-c "$src" -o "$out.$$" 2>/dev/null && mv "$out.$$" "$out"; then
		echo "$out"
		return 0
	fi
	rm -f "$out.$$"
	fabric_err "fabric_pass.bpf.o not found and clang could not build it (build the tree, set MRC_BUILD_DIR or FABRIC_XDP_PASS, or give xdp_pass=off)"
	return 1
}

# A host's XDP program answers some packets itself with XDP_TX (trim NACKs,
# EV probe responses). veth delivers an XDP_TX frame only when its peer runs
# NAPI, which it does while an XDP program is attached (GRO would do too, but
# would also merge TCP segments): every fabric-side peer of a host port
# (wire ports, leaf ports) gets an XDP_PASS program in native mode.
_fabric_xdp_pass() { # RUN
	local run=$1 obj e
	obj=$(fabric_pass_obj) || return 1
	for e in $(jq -r '.hosts as $h | .links[] |
		if .wire then "\(.wire.ns)/\(.wire.a)", "\(.wire.ns)/\(.wire.b)"
		elif ($h[.a.node] and ($h[.b.node] | not)) then "\(.b.ns)/\(.b.ifname)"
		else empty end' "$(fabric_state "$run")"); do
		# xdp.frags (multi-buffer aware, any MTU); an object built before
		# it was still has only "xdp" (MTUs up to 3506)
		ip -n "${e%/*}" link set dev "${e#*/}" xdpdrv obj "$obj" sec xdp.frags 2>/dev/null ||
			ip -n "${e%/*}" link set dev "${e#*/}" xdpdrv obj "$obj" sec xdp ||
			{ fabric_err "attaching XDP_PASS to ${e#*/} in ${e%/*} failed"; return 1; }
	done
}

# fabric_up [direct|clos] [key=value...] [--file F]  -> prints the run id
fabric_up() {
	_F_TOPO=direct _F_PLANES=4 _F_LEAVES=2 _F_SPINES=2 _F_HOSTS=2 _F_MTU=3500 _F_MTUS=""
	_F_SHAPE="" _F_BURST="" _F_LATENCY="" _F_V6=on _F_MPTCP="" _F_WIRE=on _F_OFFLOAD=off _F_XDPPASS=on _F_ECMP=off
	_F_RUN=$(fabric_new_run_id)
	local args=()
	while [ $# -gt 0 ]; do
		case "$1" in
		--file) _fabric_read_file "$2" || return 2; shift 2 ;;
		*) args+=("$1"); shift ;;
		esac
	done
	_fabric_parse_params "${args[@]}" || return 2
	_fabric_validate || return 2
	[ "$(id -u)" = 0 ] || { fabric_err "needs root"; return 1; }
	# The run's fault programs pin under $FABRIC_BPFFS (mrc_fault, from any
	# caller): a machine booted without systemd may not have it mounted.
	fabric_ensure_bpffs || { fabric_err "cannot mount a bpffs at $FABRIC_BPFFS"; return 1; }
	_F_MACPFX=$(od -An -N2 -tx1 /dev/urandom | tr -s ' ' | sed 's/^ //; s/ /:/')
	_fabric_reset
	if [ "$_F_TOPO" = direct ]; then _fabric_build_direct; else _fabric_build_clos; fi

	local dir node nsn i role
	dir=$(fabric_dir "$_F_RUN")
	mkdir -p "$dir/batch"
	# The state file first (with what will be created), so a crash mid-way
	# still leaves enough for `fabric.sh down RUN`.
	_fabric_write_state || return 1
	for i in "${!_F_NS[@]}"; do
		node=${_F_NS[$i]}
		role=${_F_NSROLE[$i]}
		nsn=$(fabric_ns "$_F_RUN" "$node")
		ip netns add "$nsn" || { fabric_down "$_F_RUN"; return 1; }
		local sys=(net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
			net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0
			net.ipv6.conf.default.keep_addr_on_down=1 net.ipv6.conf.all.keep_addr_on_down=1
			net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
			net.ipv4.fib_multipath_hash_policy=1 net.ipv6.fib_multipath_hash_policy=1)
		if [ "$role" != host ]; then
			sys+=(net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1)
		fi
		if [ "$_F_V6" = off ] || [ "$role" = wire ]; then
			sys+=(net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1)
		fi
		ip netns exec "$nsn" sysctl -q -w "${sys[@]}" >/dev/null || { fabric_down "$_F_RUN"; return 1; }
		ip -n "$nsn" link set lo up
	done
	for node in "${!_F_CREATE[@]}"; do
		printf '%s' "${_F_CREATE[$node]}" >"$dir/batch/$node.create"
		ip -n "$(fabric_ns "$_F_RUN" "$node")" -b "$dir/batch/$node.create" || { fabric_down "$_F_RUN"; return 1; }
	done
	for node in "${!_F_BATCH[@]}"; do
		printf '%s%s' "${_F_BATCH[$node]}" "${_F_ROUTES[$node]:-}" >"$dir/batch/$node.cfg"
		ip -n "$(fabric_ns "$_F_RUN" "$node")" -b "$dir/batch/$node.cfg" || { fabric_down "$_F_RUN"; return 1; }
	done
	for node in "${!_F_TC[@]}"; do
		printf '%s' "${_F_TC[$node]}" >"$dir/batch/$node.tc"
		tc -n "$(fabric_ns "$_F_RUN" "$node")" -b "$dir/batch/$node.tc" || { fabric_down "$_F_RUN"; return 1; }
	done
	if [ "$_F_OFFLOAD" = off ]; then
		# Per-packet fabric: no TSO/GSO super-packets (a fault or a tbf sees
		# wire-sized packets) and software TCP checksums (corruption is seen).
		local h
		for h in $(jq -r '.hosts[] | .ns as $n | .ports[] | "\($n)/\(.ifname)"' "$(fabric_state "$_F_RUN")"); do
			ip netns exec "${h%/*}" ethtool -K "${h#*/}" tx off tso off gso off >/dev/null 2>&1 ||
				{ fabric_err "ethtool -K ${h#*/} failed"; fabric_down "$_F_RUN"; return 1; }
		done
	fi
	if [ "$_F_XDPPASS" = on ]; then
		_fabric_xdp_pass "$_F_RUN" || { fabric_down "$_F_RUN"; return 1; }
	fi
	if [ -n "$_F_SHAPE" ]; then
		local p
		for ((p = 0; p < _F_PLANES; p++)); do
			fabric_plane_shape "$_F_RUN" "$p" "$_F_SHAPE" || { fabric_down "$_F_RUN"; return 1; }
		done
	fi
	if [ -n "$_F_MPTCP" ]; then
		fabric_mptcp "$_F_RUN" "${_F_MPTCP%%:*}" "${_F_MPTCP#*:}" || { fabric_down "$_F_RUN"; return 1; }
	fi
	echo "$_F_RUN"
}

# Kills the processes we left in the run's namespaces (flappers, workloads),
# deletes the namespaces (their veths go with them), the pins and the state.
fabric_down() {
	local run=$1 ns pid dir
	[[ $run =~ ^[a-z][a-z0-9]{1,5}$ ]] || { fabric_err "bad run id '$run'"; return 2; }
	dir=$(fabric_dir "$run")
	if [ -f "$dir/pids" ]; then
		while read -r pid; do
			[ -n "$pid" ] && kill "$pid" 2>/dev/null
		done <"$dir/pids"
	fi
	for ns in $(ip netns list | awk '{print $1}' | grep "^$FABRIC_NS_PREFIX-$run-"); do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -TERM "$pid" 2>/dev/null
		done
	done
	for ns in $(ip netns list | awk '{print $1}' | grep "^$FABRIC_NS_PREFIX-$run-"); do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
	# Filesystems mounted under the run's directory (a bpffs per host for
	# mrcd, see resilience/mrcd.sh) go first, so rm removes only files.
	local m
	while read -r m; do
		[ -n "$m" ] && { umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; }
	done < <(awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
	rm -rf "${FABRIC_BPFFS:?}/mrc-fabric/$run" "$dir"
	rmdir "$FABRIC_BPFFS/mrc-fabric" 2>/dev/null
	return 0
}

# Runs found on this machine: from state dirs and from namespace names.
fabric_list() {
	{
		ls "$FABRIC_ROOT" 2>/dev/null
		ip netns list | awk '{print $1}' | sed -n "s/^$FABRIC_NS_PREFIX-\([a-z0-9]*\)-.*/\1/p"
		ls "$FABRIC_BPFFS/mrc-fabric" 2>/dev/null
	} | grep -E '^[a-z][a-z0-9]{1,5}$' | sort -u
}

fabric_show() {
	local run=$1 st
	st=$(fabric_state "$run")
	[ -f "$st" ] || { fabric_err "no state for run $run"; return 1; }
	if [ "${2:-}" = --json ]; then
		cat "$st"
		return
	fi
	jq -r '"run \(.run): \(.topology), \(.planes) planes, mtu \(.mtu)" +
		(if .shape != "" then ", shaped \(.shape)" else "" end),
		"hosts:", (.hosts | to_entries[] | "  \(.key) (\(.value.ns))",
			(.value.ports[] | "    plane \(.plane) \(.ifname) \(.mac) \(.ipv4)/\(.prefix4) \(.ipv6)/\(.prefix6) -> \(.nexthop4) \(.nexthop_mac)")),
		"links:", (.links[] | "  \(.name) plane \(.plane): \(.a.node):\(.a.ifname) <-> \(.b.node):\(.b.ifname)")' "$st"
}

fabric_exec() { # RUN NODE cmd...
	local run=$1 node=$2
	shift 2
	ip netns exec "$(fabric_ns "$run" "$node")" "$@"
}

# -------------------------------------------------------------------------
# Links: resolution, down/up, flap, shaping

# Link names matching a pattern (exact name or shell glob).
fabric_links() { # RUN PATTERN
	local run=$1 pat=$2 n
	for n in $(fabric_q "$run" '.links[].name'); do
		# shellcheck disable=SC2053
		[[ $n == $pat ]] && echo "$n"
	done
}

# "NS IFNAME" of a link end (a or b).
fabric_link_end() { # RUN LINK a|b
	fabric_q "$1" --arg l "$2" --arg e "$3" '.links[] | select(.name == $l) | .[$e] | "\(.ns) \(.ifname) \(.node)"'
}

# Links carrying host traffic of a plane (direct: the plane link; clos: host links).
fabric_plane_links() { # RUN PLANE
	fabric_q "$1" --argjson p "$2" '.links[] | select(.plane == $p) |
		select(.a.node as $n | ($n | test("^[A-Z]$"))) | .name'
}

fabric_link_set() { # RUN LINK down|up
	local run=$1 link=$2 st=$3 end ns ifn node dir wire
	dir=$(fabric_dir "$run")
	[ -n "$(fabric_links "$run" "$link")" ] || { fabric_err "no link '$link' in run $run"; return 1; }
	wire=$(fabric_q "$run" --arg l "$link" '.links[] | select(.name == $l) | .wire // empty | "\(.ns) \(.a) \(.b)"')
	if [ -n "$wire" ]; then
		# Through the wire: both hosts lose carrier, their configuration stays.
		read -r ns ifn end <<<"$wire"
		ip -n "$ns" link set dev "$ifn" "$st" && ip -n "$ns" link set dev "$end" "$st"
		return
	fi
	for end in a b; do
		read -r ns ifn node <<<"$(fabric_link_end "$run" "$link" $end)"
		ip -n "$ns" link set dev "$ifn" "$st" || return 1
	done
	if [ "$st" = up ]; then
		# Admin down flushed routes and permanent neighbours: replay the
		# nodes' configuration (idempotent replace commands).
		for end in a b; do
			read -r ns ifn node <<<"$(fabric_link_end "$run" "$link" $end)"
			ip -n "$ns" -force -b "$dir/batch/$node.cfg" >/dev/null 2>&1
		done
	fi
	return 0
}

# Flaps a link: down for PERIOD/2, up for PERIOD/2, for DURATION seconds, in
# the background. Prints the flapper's pid (also listed for teardown).
fabric_flap() { # RUN LINK PERIOD DURATION
	local run=$1 link=$2 period=$3 dur=$4 half
	[ -n "$(fabric_links "$run" "$link")" ] || { fabric_err "no link '$link' in run $run"; return 1; }
	half=$(awk -v p="$period" 'BEGIN { printf "%.3f", p / 2 }')
	(
		end=$(awk -v d="$dur" -v n="$(date +%s.%N)" 'BEGIN { printf "%.3f", n + d }')
		while awk -v e="$end" -v n="$(date +%s.%N)" 'BEGIN { exit !(n < e) }'; do
			fabric_link_set "$run" "$link" down
			sleep "$half"
			fabric_link_set "$run" "$link" up
			sleep "$half"
		done
	) >/dev/null 2>&1 &
	echo $! >>"$(fabric_dir "$run")/pids"
	echo $!
}

# Where a direction of a link is shaped: the egress of its fault point
# (direct: the wire; clos: the router side), else of the sending end.
_fabric_shape_point() { # RUN LINK fwd|rev -> "NS IFNAME"
	fabric_q "$1" --arg l "$2" --arg d "$3" '.links[] | select(.name == $l) |
		if .fault[$d].hook == "egress" then "\(.fault[$d].ns) \(.fault[$d].ifname)"
		elif $d == "fwd" then "\(.a.ns) \(.a.ifname)" else "\(.b.ns) \(.b.ifname)" end'
}

# tbf rate limit on a link direction (fwd = a->b, rev, both).
fabric_shape() { # RUN LINK RATE [fwd|rev|both] [burst=B] [latency=L]
	local run=$1 link=$2 rate=$3 dir=${4:-both} burst="" lat="" kv dirs ns ifn
	shift 3
	[ $# -gt 0 ] && shift
	for kv in "$@"; do
		case "$kv" in burst=*) burst=${kv#burst=} ;; latency=*) lat=${kv#latency=} ;; esac
	done
	# Defaults: a 64 KB bucket and 5 ms of queue, unless given.
	burst=${burst:-${_F_BURST:-64kb}}
	lat=${lat:-${_F_LATENCY:-5ms}}
	case "$dir" in fwd | rev) dirs=$dir ;; both) dirs="fwd rev" ;; *) fabric_err "direction must be fwd, rev or both"; return 2 ;; esac
	[ -n "$(fabric_links "$run" "$link")" ] || { fabric_err "no link '$link' in run $run"; return 1; }
	for d in $dirs; do
		read -r ns ifn <<<"$(_fabric_shape_point "$run" "$link" "$d")"
		tc -n "$ns" qdisc replace dev "$ifn" root tbf rate "$rate" burst "$burst" latency "$lat" || return 1
	done
}

fabric_unshape() { # RUN LINK [fwd|rev|both]
	local run=$1 link=$2 dir=${3:-both} dirs ns ifn
	case "$dir" in fwd | rev) dirs=$dir ;; *) dirs="fwd rev" ;; esac
	for d in $dirs; do
		read -r ns ifn <<<"$(_fabric_shape_point "$run" "$link" "$d")"
		tc -n "$ns" qdisc del dev "$ifn" root 2>/dev/null
	done
	return 0
}

fabric_plane_shape() { # RUN PLANE RATE
	local l
	for l in $(fabric_plane_links "$1" "$2"); do
		fabric_shape "$1" "$l" "$3" both || return 1
	done
}

# Fault injection through mrc_fault (see mrc_fault --help).
fabric_fault() { # RUN mrc_fault-args...
	local run=$1 bin
	shift
	bin=$(fabric_fault_bin) || return 1
	fabric_ensure_bpffs || return 1
	"$bin" --state "$(fabric_state "$run")" "$@"
}

# A lower MTU inside a link's path (a switch of the plane): small packets
# pass, larger frames are dropped where they enter the lower-MTU hop. Set on
# the wire's interfaces when the link has a wire node, else on the receiving
# (b) end of the link; "restore" sets the plane's configured MTU again.
fabric_link_mtu() { # RUN LINK BYTES|restore
	local run=$1 link=$2 mtu=$3 wire ns ifn end node plane
	if [ "$mtu" = restore ]; then
		plane=$(fabric_q "$run" --arg l "$link" '.links[] | select(.name == $l) | .plane')
		mtu=$(fabric_q "$run" --argjson p "$plane" '.mtus[$p] // .mtu')
	fi
	[[ $mtu =~ ^[0-9]+$ ]] && ((mtu >= 1280 && mtu <= 65535)) || { fabric_err "mtu must be 1280..65535 or restore"; return 2; }
	wire=$(fabric_q "$run" --arg l "$link" '.links[] | select(.name == $l) | .wire // empty | "\(.ns) \(.a) \(.b)"')
	if [ -n "$wire" ]; then
		read -r ns ifn end <<<"$wire"
		ip -n "$ns" link set dev "$ifn" mtu "$mtu" && ip -n "$ns" link set dev "$end" mtu "$mtu"
		return
	fi
	read -r ns ifn node <<<"$(fabric_link_end "$run" "$link" b)"
	ip -n "$ns" link set dev "$ifn" mtu "$mtu"
}

fabric_plane() { # RUN PLANE down|up|blackhole|heal|shape RATE|unshape|loss PCT|mtu BYTES
	local run=$1 p=$2 what=$3 l
	local links
	links=$(fabric_plane_links "$run" "$p")
	[ -n "$links" ] || { fabric_err "no plane $p in run $run"; return 1; }
	for l in $links; do
		case "$what" in
		down | up) fabric_link_set "$run" "$l" "$what" || return 1 ;;
		blackhole) fabric_fault "$run" set "$l" --dir both --blackhole >/dev/null || return 1 ;;
		loss) fabric_fault "$run" set "$l" --dir both --loss "$4" >/dev/null || return 1 ;;
		mtu) fabric_link_mtu "$run" "$l" "$4" || return 1 ;;
		heal)
			fabric_fault "$run" detach "$l" --dir both >/dev/null 2>&1
			fabric_link_mtu "$run" "$l" restore || return 1
			fabric_link_set "$run" "$l" up || return 1
			;;
		shape) fabric_shape "$run" "$l" "$4" both || return 1 ;;
		unshape) fabric_unshape "$run" "$l" both ;;
		*) fabric_err "plane action must be down, up, blackhole, heal, shape RATE, unshape, loss PCT or mtu BYTES"; return 2 ;;
		esac
	done
}

# -------------------------------------------------------------------------
# MPTCP: one subflow per plane from CLIENT to SERVER.
#
# direct: the client gets a `subflow` endpoint bound to its port on every
#   plane but plane 0 (the initial subflow's); the endpoint's subflow to the
#   server's plane-0 address leaves through its own port (the subflow socket
#   is bound to the device) and the server answers on the same plane (its
#   connected route back to the client address). A static neighbour entry for
#   the server's plane-0 address on each client port keeps that exchange off
#   ARP.
# clos: plane p's routers only know plane p's addresses, so the server
#   announces (`signal`) its plane 1..P-1 addresses and the client opens one
#   subflow to each, routed through that plane.
fabric_mptcp() { # RUN CLIENT SERVER
	local run=$1 cli=$2 srv=$3 planes topo nsc nss p addr ifn smac saddr
	planes=$(fabric_q "$run" .planes)
	topo=$(fabric_q "$run" .topology)
	nsc=$(fabric_q "$run" --arg h "$cli" '.hosts[$h].ns')
	nss=$(fabric_q "$run" --arg h "$srv" '.hosts[$h].ns')
	[ "$nsc" != null ] && [ "$nss" != null ] || { fabric_err "no hosts $cli/$srv in run $run"; return 1; }
	for ns in "$nsc" "$nss"; do
		ip -n "$ns" mptcp endpoint flush
		ip -n "$ns" mptcp limits set subflow $((planes > 8 ? 8 : planes)) add_addr_accepted $((planes > 8 ? 8 : planes)) || return 1
	done
	saddr=$(fabric_q "$run" --arg h "$srv" '.hosts[$h].ports[0].ipv4')
	for ((p = 1; p < planes; p++)); do
		if [ "$topo" = direct ]; then
			addr=$(fabric_q "$run" --arg h "$cli" --argjson p $p '.hosts[$h].ports[$p].ipv4')
			ifn=$(fabric_q "$run" --arg h "$cli" --argjson p $p '.hosts[$h].ports[$p].ifname')
			smac=$(fabric_q "$run" --arg h "$cli" --argjson p $p '.hosts[$h].ports[$p].nexthop_mac')
			ip -n "$nsc" mptcp endpoint add "$addr" dev "$ifn" subflow || return 1
			ip -n "$nsc" neigh replace "$saddr" lladdr "$smac" dev "$ifn" nud permanent || return 1
			_fabric_append_cfg "$run" "$cli" "neigh replace $saddr lladdr $smac dev $ifn nud permanent"
		else
			addr=$(fabric_q "$run" --arg h "$srv" --argjson p $p '.hosts[$h].ports[$p].ipv4')
			ifn=$(fabric_q "$run" --arg h "$srv" --argjson p $p '.hosts[$h].ports[$p].ifname')
			ip -n "$nss" mptcp endpoint add "$addr" dev "$ifn" signal || return 1
		fi
	done
}

_fabric_append_cfg() { # RUN NODE line
	local f
	f="$(fabric_dir "$1")/batch/$2.cfg"
	grep -qxF "$3" "$f" 2>/dev/null || echo "$3" >>"$f"
}

# -------------------------------------------------------------------------
# CLI

fabric_main() {
	local cmd=${1:-help}
	[ $# -gt 0 ] && shift
	case "$cmd" in
	up) fabric_up "$@" ;;
	down)
		if [ "${1:-}" = --all ]; then
			for r in $(fabric_list); do fabric_down "$r"; done
		else
			fabric_down "${1:?run id}"
		fi
		;;
	show) fabric_show "${1:?run id}" "${2:-}" ;;
	list) fabric_list ;;
	state) fabric_state "${1:?run id}" ;;
	exec) fabric_exec "$@" ;;
	link) fabric_link_set "${1:?run}" "${2:?link}" "${3:?down|up}" ;;
	flap) fabric_flap "${1:?run}" "${2:?link}" "${3:?period}" "${4:?duration}" ;;
	shape) fabric_shape "$@" ;;
	unshape) fabric_unshape "$@" ;;
	plane) fabric_plane "$@" ;;
	fault) fabric_fault "$@" ;;
	mptcp) fabric_mptcp "${1:?run}" "${2:?client}" "${3:?server}" ;;
	links) fabric_links "${1:?run}" "${2:-*}" ;;
	help | -h | --help) sed -n '3,22p' "$FABRIC_SELF" | sed 's/^# \{0,1\}//' ;;
	*) fabric_err "unknown command '$cmd' (try fabric.sh help)"; return 2 ;;
	esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -u
	fabric_main "$@"
fi
