#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
"""Checks the runs of tests/inject.sh (Python standard library only).

    inject_check.py DIR

DIR holds, per run NAME (control-write, control-imm, inject-write,
inject-imm): NAME-run.json (exit codes), NAME-{client,server}.log (mrc_perf
-j output), NAME-{client,server}.json (mrc_perf --counters-json) and, for the
injected runs, NAME-inject.json (mrc_inject's report).

Every run: both mrc_perf exited 0, the data verified on both sides, no
completion error and no QP-fatal event. Every injected run: per class, the
counters of CHECKS moved at least by the packets injected; exactly when the
check says exact and the control run of the same mode left those counters at
0. Prints a table per injected run; exits 1 naming what failed.
"""

import json
import os
import sys

# Counters: "SIDE:GROUP.NAME", SIDE A = client (requester), B = server
# (responder), "*" = both; GROUP engine (EngineStats), parse
# (EngineStats.rx_parse_errors by codec::ParseError name), qp (QpStats summed
# over the QPs), xdp (struct mrc_xdp_stats summed over the ports).
# exact: nothing but the class moves the counters in this test (legitimate
# traffic may, as the control run shows: then only "at least" is checked).
CHECKS = [
    # classes, counters, exact
    # Cut inside the IP or UDP header: no longer recognisably MRC, XDP passes
    # it to the kernel, which drops it (pass_non_mrc also counts legitimate
    # non-MRC frames: at least).
    (["truncated[ip,udp]"], ["*:xdp.pass_non_mrc", "*:engine.rx_not_mrc"], False),
    # Cut further in: XDP drops it as malformed MRC (an IP length beyond the
    # frame, or with the lengths fixed up, a short BTH or header stack).
    (["truncated[bth,bth fixed,ext,ext fixed,payload,icrc]"],
     ["*:xdp.drop_bad_ip", "*:xdp.drop_truncated", "*:xdp.drop_bad_udp", "*:xdp.drop_bad_length",
      "*:parse.truncated", "*:parse.bad_ip_length", "*:parse.bad_udp_length", "*:parse.bad_length"],
     True),
    (["bad_icrc"], ["*:parse.bad_icrc"], True),
    (["bad_bth"], ["*:xdp.drop_bad_bth", "*:xdp.drop_bad_opcode", "*:parse.bad_tver",
                   "*:parse.bad_reserved_bits", "*:parse.unknown_opcode"], True),
    (["unknown_qpn"], ["*:engine.rx_unknown_qp"], True),
    (["ghost_sack"], ["A:qp.ghost_sacks"], True),
    # B answers out-of-window data with a PSN_OOR_WINDOW NACK of a PSN A never
    # sent: ghost NACKs beyond the ones injected.
    (["ghost_nack"], ["A:qp.ghost_nacks"], False),
    # B refuses bad_rkey data with an AETH NAK of a PSN A may not have sent.
    (["ghost_nak"], ["A:qp.ghost_naks"], False),
    (["stale_nack"], ["A:qp.stale_nacks"], True),
    (["stale_nak"], ["A:qp.stale_naks"], True),
    (["oor_data"], ["B:qp.rx_oor_pkts"], True),
    # A bad_rkey packet carries a PSN just ahead of the requester's: when the
    # real packet of that PSN arrives first, the forged one is a duplicate
    # (rx_dup_pkts), dropped before its rkey is looked at (stop 34's
    # rehearsal: 2 of 749). So both classes are accounted for together, and
    # the rkey check itself must have refused at least 90% of bad_rkey.
    (["replay", "bad_rkey"], ["B:qp.rx_dup_pkts", "B:qp.rem_access_errors"], False,
     {"B:qp.rem_access_errors": ("bad_rkey", 0.9)}),
    # A forged probe makes B answer A with a probe-answer SACK A never asked
    # for: both classes end in A's ghost_probe_resps.
    (["probe", "probe_sack"], ["A:qp.ghost_probe_resps"], False),
    (["ep_response"], ["A:engine.ep_unsolicited"], True),
    (["port_status"], ["A:engine.ep_bad_port_status"], True),
]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def summary(path):
    """The {"summary": ...} object of an mrc_perf -j log, and the log's lines."""
    s, lines = None, []
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip("\n") for l in f]
    except OSError:
        pass
    for l in lines:
        if l.startswith('{"summary"'):
            try:
                s = json.loads(l)["summary"]
            except json.JSONDecodeError:
                pass
    return s, lines


def counter(c, spec):
    """Value of one SIDE:GROUP.NAME counter in {"A": json, "B": json}."""
    side, path = spec.split(":", 1)
    group, name = path.split(".", 1)
    total = 0
    for s in (["A", "B"] if side == "*" else [side]):
        j = c.get(s)
        if not j:
            continue
        if group == "engine":
            total += j["engine"].get(name, 0)
        elif group == "parse":
            total += j["engine"]["rx_parse_errors"].get(name, 0)
        elif group == "qp":
            total += sum(q.get(name, 0) for q in j["qps"])
        elif group == "xdp":
            total += sum(p.get(name, 0) for p in j["xdp"])
    return total


def injected(cls, c):
    """Packets injected of class c, or of the variants listed in c[v1,v2]."""
    if "[" not in c:
        return cls[c]["injected"]
    name, vs = c[:-1].split("[", 1)
    return sum(cls[name]["variants"].get(v, 0) for v in vs.split(","))


def counters(d, name):
    return {"A": load(os.path.join(d, f"{name}-client.json")),
            "B": load(os.path.join(d, f"{name}-server.json"))}


def health(d, name, fails):
    """Exit codes, verification, QP errors of one run."""
    run = load(os.path.join(d, f"{name}-run.json")) or {}
    for role, key in (("client", "client_rc"), ("server", "server_rc")):
        rc = run.get(key)
        s, lines = summary(os.path.join(d, f"{name}-{role}.log"))
        errs = [l for l in lines if "completion error" in l or "QP-fatal" in l or "failed (QP" in l]
        why = [l for l in lines if l.startswith("mrc_perf:") and "client(s) on port" not in l]
        if rc != 0:
            fails.append(f"{name}: mrc_perf {role} exited {rc}" + (f" ({'; '.join(why[-2:])})" if why else ""))
        if errs:
            fails.append(f"{name}: {role} QP error: {errs[0]}")
        if not s or s.get("verify") != "ok":
            fails.append(f"{name}: {role} verification not ok ({s.get('verify') if s else 'no summary'})")
        elif role == "server" and (s.get("bad_slots") or s.get("imm_bad")):
            fails.append(f"{name}: server found bad data: bad_slots={s.get('bad_slots')} imm_bad={s.get('imm_bad')}")
        if not os.path.exists(os.path.join(d, f"{name}-{role}.json")):
            fails.append(f"{name}: {role} wrote no --counters-json")
    return run


def main():
    d = sys.argv[1]
    fails = []
    runs = sorted({f[:-len("-run.json")] for f in os.listdir(d) if f.endswith("-run.json")})
    for name in runs:
        health(d, name, fails)
    total_inj = total_acc = 0
    for name in [r for r in runs if r.startswith("inject-")]:
        mode = name[len("inject-"):]
        inj = load(os.path.join(d, f"{name}-inject.json"))
        if not inj:
            fails.append(f"{name}: the injector wrote no report")
            continue
        if inj.get("error"):
            fails.append(f"{name}: injector: {inj['error']}")
        got, ctl = counters(d, name), counters(d, f"control-{mode}")
        cls = inj["classes"]
        print(f"\n{name}: {inj['injected']} packets injected in {inj.get('inject_s', 0):.1f} s "
              f"({inj.get('send_errors', 0)} send errors; learned QPN A {inj['learned']['qpn_a']} "
              f"B {inj['learned']['qpn_b']}, PSN {inj['learned']['max_psn']}, "
              f"cack {inj['learned']['cack_psn']})")
        hdr = f"{'class':<24} {'injected':>8}  {'delta':>8} {'control':>8}  {'check':<9} counters"
        print(hdr)
        print("-" * len(hdr))
        for classes, specs, exact, *more in CHECKS:
            present = [c for c in classes if c.split("[")[0] in cls]
            if not present:
                continue
            n = sum(injected(cls, c) for c in present)
            delta = sum(counter(got, s) for s in specs)
            control = sum(counter(ctl, s) for s in specs)
            is_exact = exact and control == 0
            ok = (delta == n) if is_exact else (delta >= n)
            # A counter of the row that must also carry most of one class.
            for spec, (c, share) in (more[0] if more else {}).items():
                want = share * injected(cls, c) if c.split("[")[0] in cls else 0
                if counter(got, spec) < want:
                    ok = False
                    fails.append(f"{name}: {spec} moved {counter(got, spec)}, want at least "
                                 f"{share:g} x the {injected(cls, c)} {c} injected")
            nonzero = [f"{s}={counter(got, s)}" for s in specs if counter(got, s)]
            label = "+".join(present)
            label = label.replace("[bth,bth fixed,ext,ext fixed,payload,icrc]", "[bth..icrc]")
            print(f"{label:<24} {n:>8}  {delta:>8} {control:>8}  "
                  f"{('==' if is_exact else '>=') + (' ok' if ok else ' FAIL'):<9} "
                  f"{', '.join(nonzero) if nonzero else ', '.join(specs)}")
            total_inj += n
            if ok:
                total_acc += n
            else:
                fails.append(f"{name}: class {label} not accounted for: {n} injected, "
                             f"{' + '.join(specs)} moved {delta} ({'want exactly' if is_exact else 'want at least'} {n})")
        if inj.get("send_errors"):
            print(f"(send errors, not counted as injected: {inj['send_errors']}: {inj.get('send_error')})")
    print(f"\naccounted for: {total_acc} of {total_inj} injected packets")
    if fails:
        print("\nFAILED:")
        for f in fails:
            print(f"  {f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
