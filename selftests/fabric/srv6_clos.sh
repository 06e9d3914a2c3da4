#!/usr/bin/env bash
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
#
# An SRv6 uSID Clos fabric in network namespaces (Documentation/fabric.md,
# "SRv6 uSID Clos"). Sourced as a library (srv6_up / srv6_down / srv6_*) or
# run as a CLI:
#
#   srv6_clos.sh up [planes=4] [spines=4]   prints the run id
#   srv6_clos.sh down RUN
#   srv6_clos.sh evs RUN FROM TO            the EV list (PORT CONTAINER) FROM -> TO (A|B)
#   srv6_clos.sh counters RUN               per-spine MRC packets: mine / other, as JSON
#   srv6_clos.sh blackhole|heal RUN P K     fail / repair the link leaf A -> spine K of plane P
#
# Two hosts A and B; per plane p (1..planes) a leaf for each host and
# `spines` spines, every leaf wired to every spine. Plane p's locator block
# is fd00:p::/32 and its uSIDs are: leaf A 0x101, leaf B 0x102, spine k
# 0x200+k, host A 0x401, host B 0x402. A host's address on plane p is its
# uSID's final form, fd00:p:401:: / fd00:p:402::. Leaves and spines forward
# by the kernel's seg6local End with the NEXT-C-SID flavour (shift the
# container by one uSID, look the new address up); plain host addresses
# (the SACKs' way back) are routed by ECMP over every spine.
#
# Namespaces are mrc6-RUN-NODE; links are veth pairs with fixed MACs,
# link-local next hops (fe80::1 / fe80::2) and permanent neighbours: no
# neighbour discovery crosses a link, so a spine's counters count MRC only.
# Every spine counts, on its port from leaf A, the MRC packets (UDP 4791)
# whose destination names it (its uSID active: "mine") and any others.

SRV6_ROOT=${SRV6_ROOT:-/run/mrc-srv6}
SRV6_PORT=${SRV6_PORT:-4791}

srv6_ns() { echo "mrc6-$1-$2"; } # RUN NODE

srv6_err() { echo "srv6_clos: $*" >&2; }

# _srv6_link RUN NS_A IF_A NS_B IF_B MAC_A MAC_B: a veth pair, link-local
# fe80::1 (a) / fe80::2 (b), static neighbours both ways.
_srv6_link() {
	local run=$1 na=$2 ia=$3 nb=$4 ib=$5 ma=$6 mb=$7
	ip -n "$na" link add "$ia" address "$ma" type veth peer name "$ib" netns "$nb" address "$mb" || return 1
	ip -n "$na" link set dev "$ia" addrgenmode none
	ip -n "$nb" link set dev "$ib" addrgenmode none
	ip -n "$na" link set dev "$ia" up
	ip -n "$nb" link set dev "$ib" up
	ip -n "$na" addr add fe80::1/64 dev "$ia" nodad
	ip -n "$nb" addr add fe80::2/64 dev "$ib" nodad
	ip -n "$na" neigh replace fe80::2 lladdr "$mb" dev "$ia" nud permanent
	ip -n "$nb" neigh replace fe80::1 lladdr "$ma" dev "$ib" nud permanent
}

_srv6_router_ns() { # NS
	ip netns add "$1" || return 1
	ip -n "$1" link set lo up
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.forwarding=1 net.ipv6.conf.all.seg6_enabled=1 \
		net.ipv6.conf.default.seg6_enabled=1 net.ipv6.fib_multipath_hash_policy=1 \
		net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
}

# The uSID a node owns on a plane, in hex.
srv6_usid() { # NODE(la|lb|sK|ha|hb)
	case $1 in
	la) echo 101 ;; lb) echo 102 ;; ha) echo 401 ;; hb) echo 402 ;;
	s*) printf '%x' $((0x200 + ${1#s})) ;;
	esac
}

# End with NEXT-C-SID on the node's own uSID. (Its device must not be lo:
# the kernel turns a route through lo into a reject route on input.)
_srv6_end() { # NS PLANE USID DEV
	ip -n "$1" -6 route add "fd00:$2:$3::/48" encap seg6local action End flavors next-csid lblen 32 nflen 16 dev "$4"
}

# Counters on a spine's port from leaf A. This kernel has neither gact nor
# flower nor u32 statistics, but mirred counts: a matching packet is
# mirrored to c0, whose peer c1 (no IPv6) drops the copy. The first matching
# filter ends classification, so "other" counts only what "mine" did not.
_srv6_counters() { # NS PLANE USID
	ip -n "$1" link add c0 type veth peer name c1 || return 1
	ip netns exec "$1" sysctl -qw net.ipv6.conf.c1.disable_ipv6=1 net.ipv6.conf.c0.disable_ipv6=1
	ip -n "$1" link set c0 up && ip -n "$1" link set c1 up || return 1
	tc -n "$1" qdisc add dev la clsact || return 1
	tc -n "$1" filter add dev la ingress pref 10 protocol ipv6 u32 match ip6 dst "fd00:$2:$3::/48" \
		match ip6 protocol 17 0xff match ip6 dport "$SRV6_PORT" 0xffff action mirred egress mirror dev c0 || return 1
	tc -n "$1" filter add dev la ingress pref 20 protocol ipv6 u32 match ip6 protocol 17 0xff \
		match ip6 dport "$SRV6_PORT" 0xffff action mirred egress mirror dev c0
}

srv6_up() { # [planes=N] [spines=N] -> prints the run id
	local planes=4 spines=4 kv run p k
	for kv in "$@"; do
		case $kv in
		planes=*) planes=${kv#*=} ;;
		spines=*) spines=${kv#*=} ;;
		*) srv6_err "unknown parameter $kv"; return 1 ;;
		esac
	done
	run=s$(tr -dc 'a-z0-9' </dev/urandom | head -c 5)
	mkdir -p "$SRV6_ROOT/$run" || return 1
	printf '{"run":"%s","planes":%d,"spines":%d}\n' "$run" "$planes" "$spines" >"$SRV6_ROOT/$run/state.json"
	local ha hb la lb s
	ha=$(srv6_ns "$run" ha)
	hb=$(srv6_ns "$run" hb)
	for h in "$ha" "$hb"; do
		ip netns add "$h" || { srv6_down "$run"; return 1; }
		ip -n "$h" link set lo up
		ip netns exec "$h" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
	done
	for ((p = 1; p <= planes; p++)); do
		la=$(srv6_ns "$run" "l${p}a")
		lb=$(srv6_ns "$run" "l${p}b")
		if ! _srv6_router_ns "$la" || ! _srv6_router_ns "$lb"; then
			srv6_down "$run"
			return 1
		fi
		# host ports: host side a, leaf side b
		if ! _srv6_link "$run" "$ha" "p$p" "$la" h "02:6a:0$p:00:00:01" "02:6a:0$p:00:00:02" ||
			! _srv6_link "$run" "$hb" "p$p" "$lb" h "02:6b:0$p:00:00:01" "02:6b:0$p:00:00:02"; then
			srv6_down "$run"
			return 1
		fi
		ip -n "$ha" addr add "fd00:$p:401::/64" dev "p$p" nodad
		ip -n "$hb" addr add "fd00:$p:402::/64" dev "p$p" nodad
		ip -n "$ha" -6 route add "fd00:$p::/32" via fe80::2 dev "p$p"
		ip -n "$hb" -6 route add "fd00:$p::/32" via fe80::2 dev "p$p"
		local nha="" nhb=""
		for ((k = 1; k <= spines; k++)); do
			s=$(srv6_ns "$run" "s$p$k")
			_srv6_router_ns "$s" || { srv6_down "$run"; return 1; }
			# leaf side a, spine side b
			if ! _srv6_link "$run" "$la" "s$k" "$s" la "02:6c:0$p:0$k:00:01" "02:6c:0$p:0$k:00:02" ||
				! _srv6_link "$run" "$lb" "s$k" "$s" lb "02:6d:0$p:0$k:00:01" "02:6d:0$p:0$k:00:02"; then
				srv6_down "$run"
				return 1
			fi
			local su
			su=$(srv6_usid "s$k")
			_srv6_end "$s" "$p" "$su" la || { srv6_err "seg6local End next-csid refused in $s"; srv6_down "$run"; return 1; }
			ip -n "$s" -6 route add "fd00:$p:101::/48" via fe80::1 dev la
			ip -n "$s" -6 route add "fd00:$p:401::/48" via fe80::1 dev la
			ip -n "$s" -6 route add "fd00:$p:102::/48" via fe80::1 dev lb
			ip -n "$s" -6 route add "fd00:$p:402::/48" via fe80::1 dev lb
			ip -n "$la" -6 route add "fd00:$p:$su::/48" via fe80::2 dev "s$k"
			ip -n "$lb" -6 route add "fd00:$p:$su::/48" via fe80::2 dev "s$k"
			nha+=" nexthop via fe80::2 dev s$k"
			nhb+=" nexthop via fe80::2 dev s$k"
			# per-spine counters on the port from leaf A
			_srv6_counters "$s" "$p" "$su" || { srv6_down "$run"; return 1; }
		done
		if ! _srv6_end "$la" "$p" 101 h || ! _srv6_end "$lb" "$p" 102 h; then
			srv6_down "$run"
			return 1
		fi
		ip -n "$la" -6 route add "fd00:$p:401::/48" via fe80::1 dev h
		ip -n "$lb" -6 route add "fd00:$p:402::/48" via fe80::1 dev h
		# shellcheck disable=SC2086 # nexthop lists
		ip -n "$la" -6 route add "fd00:$p:402::/48" $nha
		# shellcheck disable=SC2086
		ip -n "$lb" -6 route add "fd00:$p:401::/48" $nhb
		# hosts answer some packets with XDP_TX: veth delivers those only
		# to a peer running NAPI (an XDP program), as in fabric.sh
		if [ -n "${SRV6_XDP_PASS:-}" ]; then
			ip -n "$la" link set dev h xdpdrv obj "$SRV6_XDP_PASS" sec xdp.frags 2>/dev/null ||
				ip -n "$la" link set dev h xdpdrv obj "$SRV6_XDP_PASS" sec xdp
			ip -n "$lb" link set dev h xdpdrv obj "$SRV6_XDP_PASS" sec xdp.frags 2>/dev/null ||
				ip -n "$lb" link set dev h xdpdrv obj "$SRV6_XDP_PASS" sec xdp
		fi
	done
	echo "$run"
}

srv6_down() { # RUN
	local run=$1 n
	[ -n "$run" ] || return 0
	for n in $(ip netns list | awk '{print $1}' | grep "^mrc6-$run-"); do
		ip netns del "$n"
	done
	rm -rf "${SRV6_ROOT:?}/$run"
}

# The EVs FROM -> TO (A|B): one per plane and spine, "PORT CONTAINER".
srv6_evs() { # RUN FROM TO
	local st planes spines p k f t
	st=$SRV6_ROOT/$1/state.json
	planes=$(jq -r .planes "$st")
	spines=$(jq -r .spines "$st")
	f=$(srv6_usid "l${2,,}")
	t=$(srv6_usid "l${3,,}")
	for ((p = 1; p <= planes; p++)); do
		for ((k = 1; k <= spines; k++)); do
			echo "$p fd00:$p:$f:$(srv6_usid "s$k"):$t:$(srv6_usid "h${3,,}")::"
		done
	done
}

_srv6_count() { # NS PREF -> packets its filter's action saw
	tc -n "$1" -s -j filter show dev la ingress pref "$2" |
		jq '[.[] | .options.actions[]?.stats.packets // empty] | add // 0'
}

# {"<plane>/<spine>": {"mine": N, "other": N}, ...}
srv6_counters() { # RUN
	local st planes spines p k s mine other out="{"
	st=$SRV6_ROOT/$1/state.json
	planes=$(jq -r .planes "$st")
	spines=$(jq -r .spines "$st")
	for ((p = 1; p <= planes; p++)); do
		for ((k = 1; k <= spines; k++)); do
			s=$(srv6_ns "$1" "s$p$k")
			mine=$(_srv6_count "$s" 10)
			other=$(_srv6_count "$s" 20)
			out+="\"$p/$k\":{\"mine\":$mine,\"other\":$other},"
		done
	done
	echo "${out%,}}"
}

# {"<node>/<dev>": drops, ...}: every interface of the run's namespaces
# that dropped packets (either direction), for telling a path's real losses
# (a veth ring overflowing while its NAPI waited for a CPU) from late packets.
srv6_drops() { # RUN
	local ns
	for ns in $(ip netns list | awk -v p="mrc6-$1-" 'index($1, p) == 1 {print $1}'); do
		ip -n "$ns" -s -j link show | jq --arg n "${ns#mrc6-$1-}" \
			'.[] | select(.ifname != "lo") | {key: "\($n)/\(.ifname)", value: (.stats64.rx.dropped + .stats64.tx.dropped)}'
	done | jq -s -c 'from_entries'
}

# Fails the link from plane P's leaf A to spine K silently: the spine
# drops everything arriving on it (redirected to c0, whose peer drops it),
# with no carrier change, no ICMP and no route change anywhere.
srv6_blackhole() { # RUN PLANE SPINE
	local s
	s=$(srv6_ns "$1" "s$2$3")
	tc -n "$s" filter add dev la ingress pref 1 protocol all u32 match u32 0 0 action mirred egress redirect dev c0
}

# Repairs what srv6_blackhole failed.
srv6_heal() { # RUN PLANE SPINE
	tc -n "$(srv6_ns "$1" "s$2$3")" filter del dev la ingress pref 1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -u
	cmd=${1:-}
	shift || true
	case $cmd in
	up) srv6_up "$@" ;;
	down) srv6_down "$@" ;;
	evs) srv6_evs "$@" ;;
	counters) srv6_counters "$@" ;;
	blackhole) srv6_blackhole "$@" ;;
	heal) srv6_heal "$@" ;;
	*) echo "usage: $0 up|down|evs|counters|blackhole|heal ..." >&2; exit 2 ;;
	esac
fi
