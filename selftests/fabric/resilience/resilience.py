#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
"""mrc resilience suite driver (Python standard library only).

    resilience.py [--build DIR] [--out DIR] run NAME...    run scenarios (or 'all')
    resilience.py [--out DIR] table                         rebuild the table from results
    resilience.py list                                      scenarios and what they check

Each scenario is a file of selftests/fabric/resilience/ run by the fabric's
scenario runner (selftests/fabric/scenario.py): mrc_perf writes with
immediate data and --verify on both sides, so the server checks every
message byte for byte as it arrives. The driver then checks

  - zero corruption: every server says verify ok with no bad slot, no bad
    message and no message it could not check, and the messages the servers
    checked are exactly the messages the clients completed;
  - zero QP errors: every mrc_perf exits 0 (a completion error or a QP-fatal
    event exits 1; the reason it printed is shown with the exit code);
  - the scenario's own liveness checks (the transfer kept going, the plane
    came back, trims were NACKed, ...);

prints the scenario's measured figures, and writes OUT/NAME/result.json.
Every run rebuilds OUT/resilience.json and OUT/resilience.md from all the
results in OUT. A scenario may also state a target (what MRC should achieve,
e.g. traffic leaving an ECN-marked spine): it is measured and reported as
met or missed in the table, and fails the run only with --strict (or
MRC_RESILIENCE_STRICT=1). MRC_RESILIENCE_PERF_ARGS="..." appends options to
every mrc_perf workload of the scenario (a copy in OUT/NAME), for A/B runs of
one build. Documentation/resilience.md describes the suite.

Exit codes: 0 pass, 1 fail, 77 skipped (not root, a tool or mrcd missing).
"""

import argparse
import datetime
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import scenario  # noqa: E402  (the runner: its reading of a tc rate)
RUNNER = os.path.join(HERE, "..", "scenario.py")
# Inside the VM layer (MRC_IN_VM=1, maybe TCG) the runner's limit is 5x longer,
# and the scenarios' rates are divided by VM_RATE_DIV (the runner's
# MRC_SCENARIO_RATE_DIV): under TCG the guest pushed about 0.19 Gbit/s in all
# through 4 planes of 1 Gbit/s, so the goodput ratios measured the emulator.
IN_VM = os.environ.get("MRC_IN_VM") == "1"
VM_SLOW = 5 if IN_VM else 1
VM_RATE_DIV = 40 if IN_VM else 1

# ... and the transfers last twice the scenario's duration (the runner's
# MRC_SCENARIO_DURATION_MUL): each event's command may take seconds there,
# and 10-mrcd-restart's kill came after the 9 s transfer had ended.
VM_DURATION_MUL = 2 if IN_VM else 1
SKIP = 77


# ---------------------------------------------------------------------------
# Series helpers. Samples are (t_s, Gbit/s) of 10 ms bins; t is the end of
# the bin on the runner's clock (t = 0 when the last workload started).


def window(ts, vs, lo, hi):
    return [(t, v) for t, v in zip(ts, vs) if lo <= t < hi]


def bins(ts, vs, lo, hi, width=0.1):
    """Means of `width`-second bins over [lo, hi) (bins without samples left out)."""
    out = {}
    for t, v in window(ts, vs, lo, hi):
        out.setdefault(int((t - lo) / width), []).append(v)
    return [statistics.mean(out[k]) for k in sorted(out)]


def median(xs):
    return statistics.median(xs) if xs else None


def longest_stall_ms(ts, vs, lo, hi, step=0.01):
    """Longest run of consecutive empty samples in [lo, hi), in ms."""
    best = cur = 0
    for _, v in window(ts, vs, lo, hi):
        cur = cur + 1 if v <= 0 else 0
        best = max(best, cur)
    return round(best * step * 1000)


def t_effect(f):
    """When a fault event took effect: the fault programs' update time
    (t_effect_s, mrc_fault events), else when the action started."""
    return f.get("t_effect_s", f["t_start_s"])


def rnd(x, n=3):
    return None if x is None else round(x, n)


def ratio(a, b):
    return None if a is None or not b else a / b


# ---------------------------------------------------------------------------
# Reading a run


def read_samples(path):
    """Receiver samples of an mrc_perf server log: [(mono_ns, bytes, planes)]."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith('{"t_ms"'):
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                continue
            out.append(j)
    return out


def series_from(samples, t0_mono_ns):
    """(t_s, Gbit/s) per sample from mrc_perf's mono_ns lines."""
    ts, vs, prev = [], [], None
    for s in samples:
        if prev is not None:
            dt = (s["mono_ns"] - prev) / 1e9
            if dt > 0:
                ts.append((s["mono_ns"] - t0_mono_ns) / 1e9)
                vs.append(s["bytes"] * 8 / dt / 1e9)
        prev = s["mono_ns"]
    return ts, vs


class Run:
    """One scenario run: the runner's scenario.json and the workload logs."""

    def __init__(self, out):
        self.out = out
        with open(os.path.join(out, "scenario.json")) as f:
            self.j = json.load(f)
        self.faults = self.j["faults"]
        self.duration = self.j["duration_s"]
        self.workloads = self.j["workloads"]
        for i, w in enumerate(self.workloads):
            w["log"] = os.path.join(out, f"workload{i}-{w['node']}.log")
            w["role"] = "server" if re.search(r"\bmrc_perf server\b", w["command"]) else (
                "client" if re.search(r"\bmrc_perf client\b", w["command"]) else "other")
        self.servers = [w for w in self.workloads if w["role"] == "server"]
        self.clients = [w for w in self.workloads if w["role"] == "client"]
        ws = self.j["workload_samples"]
        self.app_t, self.app_v = ws["t_s"], ws["gbps"]
        s = self.j["samples"]
        self.wire_t, self.wire_v = s["t_s"], s["total_gbps"]
        self.planes = {int(p): v for p, v in s["planes_gbps"].items()}
        self.t0_mono = self.j["t0_mono_ns"]  # t = 0 on CLOCK_MONOTONIC
        # The end of the transfer on the runner's clock: the scenario's
        # duration, or later when the workloads started late (a TCG guest
        # takes seconds to start mrc_perf): the receiver's last sample with
        # data. The windows "after the fault" end here.
        last = max((t for t, v in zip(self.app_t, self.app_v) if v > 0), default=0.0)
        self.end = max(self.duration, last)

    def fault(self, prefix, nth=0):
        """The nth applied event whose action starts with `prefix`."""
        hits = [f for f in self.faults if f["action"].startswith(prefix)]
        if len(hits) <= nth:
            raise KeyError(f"no event '{prefix}' in the run")
        return hits[nth]

    def node_series(self, node):
        w = next(w for w in self.servers if w["node"] == node)
        return series_from(read_samples(w["log"]), self.t0_mono)

    def snapshot(self, label):
        return self.j.get("fault_counters", {}).get(label, {}).get("counters", [])

    def client_total(self, key):
        return sum((c.get("summary") or {}).get(key, 0) for c in self.clients)


def ev_log(run, node=None):
    """EV state changes the clients logged (mrc_perf --ev-log OUT/ev-NODE.log):
    [{t_s, node, ev, port, from, to, reason}], t on the runner's clock."""
    out = []
    for p in sorted(glob.glob(os.path.join(run.out, "ev-*.log"))):
        n = os.path.basename(p)[3:-4]
        if node and n != node:
            continue
        with open(p, errors="replace") as f:
            for line in f:
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                e["node"] = n
                e["t_s"] = (e["t_ns"] - run.t0_mono) / 1e9
                out.append(e)
    return out


def ev_counts(events):
    """Retirements (into ASSUMED_BAD from a usable state) by reason,
    readmissions by probes, demotions undone as spurious, events lost."""
    retired, c = {}, {"evs_retired": 0, "evs_readmitted": 0, "evs_undone": 0, "ev_events_lost": 0}
    for e in events:
        c["ev_events_lost"] += e.get("dropped_before", 0)
        if e["to"] == "ASSUMED_BAD" and e["from"] != "ASSUMED_BAD":
            c["evs_retired"] += 1
            retired[e["reason"]] = retired.get(e["reason"], 0) + 1
        elif e["to"] == "GOOD" and e["from"] == "ASSUMED_BAD":
            c["evs_readmitted" if e["reason"] == "probe_ok" else "evs_undone"] += 1
    c["evs_retired_by_reason"] = retired
    return c


def fault_sum(counters, link_glob, direction, key):
    rx = re.compile("^" + re.escape(link_glob).replace(r"\*", ".*") + "$")
    return sum(c["counters"][key] for c in counters if rx.match(c["link"]) and c["dir"] == direction)


# ---------------------------------------------------------------------------
# Checks and figures


class Result:
    def __init__(self, name, spec):
        self.name, self.spec = name, spec
        self.checks = []   # {desc, ok, value}
        self.targets = []  # {desc, met, value}
        self.fig = {}      # figure name -> value
        self.main = None   # (label, value, unit) shown first in the table

    def check(self, desc, ok, value=None, floor=False):
        # floor: a bound on a figure the host's own load moves (goodput, a
        # stall, a time); the others (data, errors, counters) are exact.
        self.checks.append({"desc": desc, "ok": bool(ok), "value": value, "floor": floor})

    def target(self, desc, met, value=None):
        self.targets.append({"desc": desc, "met": bool(met), "value": value})

    @property
    def ok(self):
        return all(c["ok"] for c in self.checks)


def common_checks(run, r):
    """Zero corruption, zero QP errors, every message checked on arrival."""
    for w in run.workloads:
        if w["role"] == "other":
            continue
        with open(w["log"], errors="replace") as f:
            lines = [l.strip() for l in f]
        errs = [l for l in lines if "completion error" in l or "QP-fatal event" in l]
        # A failed mrc_perf names its reason on a line of its own ("mrc_perf:
        # what: why"): shown with the exit code, so a CI log says why.
        why = [l for l in lines if l.startswith("mrc_perf:")
               and not any(k in l for k in ("client(s) on port", "in flight per QP"))]
        r.check(f"{w['node']}: mrc_perf {w['role']} exit code 0 (no completion error, data verified)",
                w.get("exit") == 0,
                w.get("exit") if w.get("exit") == 0 or not why else f"{w.get('exit')} ({'; '.join(why[-3:])})")
        r.check(f"{w['node']}: no completion (QP) error", not errs, errs[0] if errs else 0)
    checked = sent = 0
    for w in run.servers:
        s = w.get("summary") or {}
        r.check(f"{w['node']}: server verification ok, 0 bad slots, 0 bad messages, every message checked",
                s.get("verify") == "ok" and s.get("bad_slots") == 0 and s.get("imm_bad") == 0
                and s.get("imm_overwritten") == 0,
                {k: s.get(k) for k in ("verify", "bad_slots", "imm_bad", "imm_overwritten")})
        checked += s.get("imm_ok", 0)
    for w in run.clients:
        s = w.get("summary") or {}
        r.check(f"{w['node']}: client verification ok", s.get("verify") == "ok", s.get("verify"))
        sent += s.get("msgs", 0)
    r.check("messages checked on arrival == messages completed by the clients", checked == sent and sent > 0,
            f"{checked} / {sent}")
    r.fig["messages_verified"] = checked
    r.fig["bytes_verified"] = sum((w.get("summary") or {}).get("rx_bytes", 0) for w in run.servers)
    for k in ("rtx", "timeouts", "ev_readmitted", "ev_skips", "plane_suspects", "nacks", "tlp", "spurious_rtx",
              "plane_silences", "silent_paced", "plane_quiets"):
        r.fig[k] = run.client_total(k)
    # The engine's ev_assumed_bad counter also counts every failed probe of an
    # EV that is already ASSUMED_BAD; the EV log gives the retirements.
    r.fig["ev_assumed_bad_counter"] = run.client_total("ev_assumed_bad")
    r.fig.update(ev_counts(ev_log(run)))


def window_figures(run, r, start, end, min_ratio, max_stall_ms, label="fault"):
    """Goodput before [start-2 s, start), during [start, end), after (end+0.5 s ..)."""
    t, v = run.app_t, run.app_v
    pre = median(bins(t, v, max(1.0, start - 2.0), start))
    dur_bins = bins(t, v, start, end)
    dur = median(dur_bins)
    after = median(bins(t, v, end + 0.5, run.end - 0.3)) if end + 1.0 < run.end else None
    stall = longest_stall_ms(t, v, 0.5, run.end - 0.3)
    zero_bins = sum(1 for _, x in window(t, v, start, end) if x <= 0)
    r.fig.update({"pre_gbps": rnd(pre), "during_gbps": rnd(dur), "after_gbps": rnd(after),
                  "ratio": rnd(ratio(dur, pre)), "min_100ms_gbps": rnd(min(dur_bins) if dur_bins else None),
                  "min_10ms_gbps": rnd(min((x for _, x in window(t, v, start, end)), default=None)),
                  "zero_10ms_bins_during": zero_bins, "longest_stall_ms": stall,
                  "window_s": rnd(end - start, 2)})
    r.main = ("goodput during / before", rnd(ratio(dur, pre), 2), "")
    r.check(f"goodput during the {label} >= {min_ratio} x before", (ratio(dur, pre) or 0) >= min_ratio,
            f"{rnd(dur)} / {rnd(pre)} Gbit/s = {rnd(ratio(dur, pre), 2)}", floor=True)
    r.check(f"no stall longer than {max_stall_ms} ms (10 ms bins without data)", stall <= max_stall_ms,
            f"{stall} ms", floor=True)


# Each evaluator gets (run, result, spec).

def eval_window(run, r, s):
    f = run.fault(s["fault"])
    c = run.fault(s["clear"]) if s.get("clear") else None
    end = t_effect(c) if c else run.end - 0.3
    window_figures(run, r, t_effect(f), end, s["min_ratio"], s["max_stall_ms"])
    if s.get("usable_planes"):
        partial_figures(run, r, s, t_effect(f), end)
    elif s.get("target_ratio"):
        ok = (r.fig["ratio"] or 0) >= s["target_ratio"] and r.fig["zero_10ms_bins_during"] == 0
        r.target(f"goodput during >= {s['target_ratio']} x before and no 10 ms bin at zero", ok,
                 f"ratio {r.fig['ratio']}, {r.fig['zero_10ms_bins_during']} empty bins")


def partial_figures(run, r, s, start, end):
    """A partial fault (issue 21): goodput during the fault against the
    capacity that remains usable, the same run's 2 s before the fault and
    its last second (from 0.5 s after the heal) being the no-fault control.
    remaining = min(control goodput, usable planes x the
    plane rate x goodput / wire bytes before): on this CPU-bound host the
    hosts, not the planes, usually set it. The target: during >= 0.95 x
    remaining, no empty 10 ms bin, no ACK timeout (in the run), no QP error
    (the common checks). The liveness check is min_remaining (measured
    figures and the gap: Documentation/resilience.md)."""
    t, v = run.app_t, run.app_v
    lo = max(1.0, start - 2.0)
    # The no-fault control: the 100 ms bins before the fault and those from
    # 0.5 s after it healed, together (goodput still ramps up during the
    # first seconds of a transfer on this loaded host: "before" alone
    # understated it by up to a third).
    hi = run.end - 0.3

    def control_span(fn, tt, vv):  # fn (bins or window) over both control spans
        return fn(tt, vv, lo, start) + (fn(tt, vv, end + 0.5, hi) if end + 0.8 < hi else [])

    control = median(control_span(bins, t, v))
    wire = median(control_span(bins, run.wire_t, run.wire_v))
    per_wire = min(1.0, control / wire) if control and wire else None
    rate = plane_gbps(s) / VM_RATE_DIV
    cap = s["usable_planes"] * rate * per_wire if per_wire else None
    remaining = min(control, cap) if control and cap else control
    dur = r.fig.get("during_gbps")
    rel = ratio(dur, remaining)
    # ... and this host's own empty 10 ms bins there (a descheduled mrc_perf
    # empties bins with nothing failing), per second, beside the fault's
    ctl_w = control_span(window, t, v)
    ctl_zero = sum(1 for _, x in ctl_w if x <= 0)
    ctl_s = max(len(ctl_w) * 0.01, 0.01)
    r.fig.update({"control_zero_10ms_bins": ctl_zero, "control_s": rnd(ctl_s, 2),
                  "control_zero_bins_per_s": rnd(ctl_zero / ctl_s, 2),
                  "fault_zero_bins_per_s": rnd(r.fig["zero_10ms_bins_during"] / max(end - start, 0.01), 2)})
    r.fig.update({"control_gbps": rnd(control), "goodput_per_wire": rnd(per_wire),
                  "usable_planes": s["usable_planes"], "remaining_gbps": rnd(remaining),
                  "during_over_remaining": rnd(rel),
                  "min_100ms_over_remaining": rnd(ratio(r.fig.get("min_100ms_gbps"), remaining))})
    r.main = ("goodput during / remaining capacity", rnd(rel, 2), "")
    r.check(f"goodput during the fault >= {s['min_remaining']} x the remaining capacity",
            (rel or 0) >= s["min_remaining"], f"{rnd(dur)} / {rnd(remaining)} Gbit/s = {rnd(rel, 3)}",
            floor=True)
    tmo = r.fig.get("timeouts") or 0
    ok = (rel or 0) >= 0.95 and r.fig["zero_10ms_bins_during"] == 0 and tmo == 0
    r.target("goodput during >= 0.95 x remaining capacity, no 10 ms bin at zero, no ACK timeout", ok,
             f"ratio {rnd(rel, 3)}, {r.fig['zero_10ms_bins_during']} empty bins, {tmo} ACK timeouts")


def span_samples(ts, vs):
    """(start, end, value) of each sample: it covers the time since the one before."""
    return [(ts[i - 1], ts[i], vs[i]) for i in range(1, len(ts))]


def in_spans(samples, spans):
    """Values of the samples that lie wholly inside one of `spans` (a sample
    across a switch between the fault and the clean plane belongs to neither)."""
    return [v for a, b, v in samples if any(lo <= a and b <= hi for lo, hi in spans)]


def eval_alternating(run, r, s):
    """A partial fault switched on and off (issue 21): `spans` times on for
    `span_s`, then clean for as long. Each faulted span's goodput is judged
    against the capacity that remains, the clean spans on either side of it
    being its no-fault control: remaining = min(control, usable planes x the
    plane rate x goodput / wire bytes in the clean spans). Beside a control
    from the seconds before and after the fault (19, 20), a drift of the
    hosts' speed over seconds cancels out. The figure: the median over the
    faulted spans; the target as for partial_figures."""
    ons = sorted(t_effect(f) for f in run.faults if f["action"].startswith(s["fault"]))
    offs = sorted(t_effect(f) for f in run.faults if f["action"].startswith(s["clear"]))
    n, span = s["spans"], s["span_s"]
    in_turn = len(ons) == n and len(offs) == n and \
        all(ons[i] < offs[i] and (i + 1 == n or offs[i] < ons[i + 1]) for i in range(n))
    r.check(f"the fault switched on and off {n} times, in turn", in_turn, f"{len(ons)} on, {len(offs)} off")
    if not in_turn:
        return
    on_spans = list(zip(ons, offs))
    off_spans = [(ons[0] - span, ons[0])] + [(offs[i], ons[i + 1]) for i in range(n - 1)] + \
                [(offs[-1], min(offs[-1] + span, run.end - 0.3))]
    app = span_samples(run.app_t, run.app_v)
    wire = span_samples(run.wire_t, run.wire_v)
    control_all = in_spans(app, off_spans)
    wire_all = in_spans(wire, off_spans)
    control = statistics.mean(control_all) if control_all else None
    wire_mean = statistics.mean(wire_all) if wire_all else None
    per_wire = min(1.0, control / wire_mean) if control and wire_mean else None
    cap = s["usable_planes"] * plane_gbps(s) / VM_RATE_DIV * per_wire if per_wire else None
    rels, durs, ctls = [], [], []
    for i, on in enumerate(on_spans):
        d = in_spans(app, [on])
        c = in_spans(app, [off_spans[i], off_spans[i + 1]])
        if not d or not c:
            continue
        dur, ctl = statistics.mean(d), statistics.mean(c)
        rem = min(ctl, cap) if cap else ctl
        durs.append(dur)
        ctls.append(ctl)
        rels.append(dur / rem if rem else 0.0)
    rel = median(rels)
    zero_on = sum(1 for x in in_spans(app, on_spans) if x <= 0)
    zero_off = sum(1 for x in control_all if x <= 0)
    stall = longest_stall_ms(run.app_t, run.app_v, 0.5, run.end - 0.3)
    # Each plane's wire rate in the faulted and the clean spans, and what the
    # other planes carry in the faulted ones against the clean ones: whether
    # they take up what the faulted plane cannot carry.
    pl_on, pl_off = [], []
    for p in sorted(run.planes):
        x = span_samples(run.wire_t, run.planes[p])
        on_x, off_x = in_spans(x, on_spans), in_spans(x, off_spans)
        pl_on.append(statistics.mean(on_x) if on_x else None)
        pl_off.append(statistics.mean(off_x) if off_x else None)
    others = [i for i in range(len(pl_on)) if i != s.get("faulted_plane", 1)
              and pl_on[i] is not None and pl_off[i]]
    others_rel = statistics.mean(pl_on[i] / pl_off[i] for i in others) if others else None
    r.fig.update({"planes_gbps_faulted_spans": [rnd(x) for x in pl_on],
                  "planes_gbps_clean_spans": [rnd(x) for x in pl_off],
                  "other_planes_faulted_over_clean": rnd(others_rel)})
    r.fig.update({"spans": len(rels), "during_gbps": rnd(median(durs)), "control_gbps": rnd(median(ctls)),
                  "goodput_per_wire": rnd(per_wire), "usable_planes": s["usable_planes"], "cap_gbps": rnd(cap),
                  "during_over_remaining": rnd(rel),
                  "during_over_remaining_spans": [rnd(x) for x in rels],
                  "during_over_remaining_lowest": rnd(min(rels) if rels else None),
                  "zero_10ms_bins_during": zero_on, "control_zero_10ms_bins": zero_off,
                  "longest_stall_ms": stall, "window_s": rnd(sum(b - a for a, b in on_spans), 2)})
    r.main = ("goodput during / remaining capacity, median of the spans", rnd(rel, 2), "")
    r.check(f"goodput during the fault >= {s['min_remaining']} x the remaining capacity (median of the spans)",
            (rel or 0) >= s["min_remaining"],
            f"{[rnd(x, 2) for x in rels]}, median {rnd(rel, 3)}", floor=True)
    r.check(f"no stall longer than {s['max_stall_ms']} ms (10 ms bins without data)", stall <= s["max_stall_ms"],
            f"{stall} ms", floor=True)
    tmo = r.fig.get("timeouts") or 0
    ok = (rel or 0) >= 0.95 and zero_on == 0 and tmo == 0
    r.target("goodput during >= 0.95 x remaining capacity (median of the spans), no 10 ms bin at zero, "
             "no ACK timeout", ok, f"ratio {rnd(rel, 3)}, {zero_on} empty bins, {tmo} ACK timeouts")


def eval_plane_return(run, r, s):
    """A plane goes down and comes back: nothing on it while down, traffic on
    it again after, and how long that took (receiver's per-plane wire bytes)."""
    down, up = run.fault(s["fault"]), run.fault(s["clear"])
    p = s["plane"]
    window_figures(run, r, down["t_start_s"], up["t_start_s"], s["min_ratio"], s["max_stall_ms"], "port failure")
    pt, pv = run.wire_t, run.planes[p]
    total = run.wire_v
    pre_share = ratio(sum(x for _, x in window(pt, pv, 1.0, down["t_start_s"])),
                      sum(x for _, x in window(run.wire_t, total, 1.0, down["t_start_s"])))
    while_down = sum(x for _, x in window(pt, pv, down["t_applied_s"] + 0.1, up["t_start_s"]))
    pre_rate = median(bins(pt, pv, 1.0, down["t_start_s"]))
    # From the link's return: the first 10 ms bin from which the next 100 ms
    # average at least half the plane's pre-fault rate.
    back_ms = None
    post = window(pt, pv, up["t_applied_s"], run.end - 0.3)
    for i in range(len(post) - 9):
        if pre_rate and statistics.mean(x for _, x in post[i:i + 10]) >= 0.5 * pre_rate:
            back_ms = max(0, round((post[i][0] - 0.01 - up["t_applied_s"]) * 1000))
            break
    post_share = ratio(sum(x for _, x in window(pt, pv, up["t_applied_s"] + 1.0, run.end - 0.3)),
                       sum(x for _, x in window(run.wire_t, total, up["t_applied_s"] + 1.0, run.end - 0.3)))
    r.fig.update({"plane": p, "plane_share_before": rnd(pre_share), "plane_gbit_while_down": rnd(while_down * 0.01, 4),
                  "plane_back_ms": back_ms, "plane_share_after": rnd(post_share)})
    r.main = (f"plane {p} back after up (ms)", back_ms, "ms")
    r.check(f"plane {p} carried nothing while down", while_down == 0, f"{rnd(while_down * 0.01, 4)} Gbit")
    r.check(f"plane {p} carries traffic again: >= 10% of the bytes from 1 s after up",
            (post_share or 0) >= 0.10, f"share {rnd(post_share)} (before: {rnd(pre_share)})", floor=True)
    r.check(f"plane {p} back to half its pre-fault rate within 2 s of up", back_ms is not None and back_ms <= 2000,
            f"{back_ms} ms", floor=True)


def eval_incast(run, r, s):
    # The incast clients run 4 s from the go signal, or from when they
    # really started: the target's first sample with data (a TCG guest takes
    # seconds to start seven mrc_perf clients).
    it, iv = run.node_series(s["target"])
    go = run.fault("exec A: touch")["t_start_s"]
    go = max(go, min((t for t, v in zip(it, iv) if v > 0), default=go))
    end = go + 4.0
    vt, vv = run.node_series(s["victim"])
    alone = median(bins(vt, vv, 1.0, go) + bins(vt, vv, end + 0.5, run.end - 0.3))
    during = median(bins(vt, vv, go + 0.3, end))
    incast = median(bins(it, iv, go + 0.3, end))
    end_c = run.snapshot("end")
    trimmed = fault_sum(end_c, s["trim_links"], "rev", "trimmed")
    seen = fault_sum(end_c, s["trim_links"], "rev", "seen")
    inc = [c for c in run.clients if c["node"] != s["victim_client"]]
    gb = [(c.get("summary") or {}).get("gbps", 0) for c in inc]
    jain = (sum(gb) ** 2 / (len(gb) * sum(x * x for x in gb))) if gb and any(gb) else None
    nacks = sum((c.get("summary") or {}).get("nacks", 0) for c in inc)
    tmo = sum((c.get("summary") or {}).get("timeouts", 0) for c in inc)
    cap = s["capacity_gbps"] / VM_RATE_DIV
    r.fig.update({"incast_from_s": rnd(go), "victim_alone_gbps": rnd(alone), "victim_during_gbps": rnd(during),
                  "victim_ratio": rnd(ratio(during, alone)), "incast_gbps": rnd(incast),
                  "incast_capacity_gbps": cap,
                  "incast_utilisation": rnd(ratio(incast, cap)),
                  "incast_fairness_jain": rnd(jain), "trimmed": trimmed, "trimmed_share": rnd(ratio(trimmed, seen), 4),
                  "incast_nacks": nacks, "incast_timeouts": tmo,
                  "incast_client_gbps": [rnd(x) for x in gb]})
    r.main = ("victim goodput during / alone", rnd(ratio(during, alone), 2), "")
    r.check("the last hop trimmed (the incast overran it)", trimmed > 0, trimmed)
    # The receiver's XDP program answers each trimmed header it gets with a
    # NACK (its tx_trim_nack counters): those must all reach the senders.
    target_log = next(w["log"] for w in run.servers if w["node"] == s["target"])
    with open(target_log, errors="replace") as f:
        arrived = sum(int(m) for m in re.findall(r"\btx_trim_nack=(\d+)", f.read()))
    r.fig.update({"trims_reached_receiver": arrived})
    r.check("every trimmed header the receiver got came back as a NACK (>= 90%)",
            nacks >= 0.9 * arrived and arrived > 0, f"{nacks} NACKs / {arrived} trims at the receiver")
    # ... and on the host nearly every trimmed header gets there. In a TCG
    # guest a quarter to a half of them were lost between the trimmer and
    # the receiver's XDP program (the qdisc or the veth ring, in the bursts
    # that made the trimmer trim), so there it is reported, not checked.
    desc = "trimmed packets came back as NACKs (>= 90% of the trims)"
    if not IN_VM:
        r.check(desc, nacks >= 0.9 * trimmed and nacks > 0, f"{nacks} NACKs / {trimmed} trims")
    else:
        print(f"  in the VM, not checked: {desc}: {nacks} NACKs / {trimmed} trims", flush=True)
    r.check(f"victim kept >= {s['min_victim_ratio']} of its goodput alone", (ratio(during, alone) or 0) >= s["min_victim_ratio"],
            f"{rnd(during)} / {rnd(alone)} Gbit/s", floor=True)
    r.check(f"incast goodput >= {s['min_utilisation']} of the trimmed capacity",
            (ratio(incast, cap) or 0) >= s["min_utilisation"], f"{rnd(incast)} Gbit/s", floor=True)


def eval_ecn(run, r, s):
    f = run.fault(s["fault"])
    c = run.fault(s["clear"])
    window_figures(run, r, t_effect(f), t_effect(c), s["min_ratio"], s["max_stall_ms"], "ECN hot spot")
    before, during = run.snapshot("before"), run.snapshot("during")

    def share(hot, cool, a, b):
        h = fault_sum(b, hot, "rev", "seen") - (fault_sum(a, hot, "rev", "seen") if a else 0)
        k = fault_sum(b, cool, "rev", "seen") - (fault_sum(a, cool, "rev", "seen") if a else 0)
        return ratio(h, h + k)

    sb = share(s["hot"], s["cool"], None, before)
    sd = share(s["hot"], s["cool"], before, during)
    marked = fault_sum(during, s["hot"], "rev", "marked")
    r.fig.update({"hot_spine_share_before": rnd(sb), "hot_spine_share_during": rnd(sd), "ce_marked": marked})
    r.main = ("hot-spine share before -> during", f"{rnd(sb, 2)} -> {rnd(sd, 2)}", "")
    r.check("the hot spine marked CE", marked > 0, marked)
    r.check("the sender saw the ECN echoes (EV skips)", r.fig["ev_skips"] > 0, r.fig["ev_skips"])
    r.target("traffic moves off the hot spine: share during <= 0.5 x share before",
             sb is not None and sd is not None and sd <= 0.5 * sb, f"{rnd(sb)} -> {rnd(sd)}")


def eval_mrcd(run, r, s):
    """mrcd killed and restarted: the transfer goes on through the outage; the
    daemons come back (new pid, restart counted) and keep the XDP program."""
    kill, start = run.fault(s["fault"]), run.fault(s["clear"])
    window_figures(run, r, kill["t_start_s"], start["t_applied_s"], s["min_ratio"], s["max_stall_ms"],
                   "controller outage")

    def status(ev):
        out = {}
        for line in ev.get("output", "").splitlines():
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                continue
            out[j["node"]] = j
        return out

    before, after = status(run.fault(s["status"], 0)), status(run.fault(s["status"], 1))
    r.fig.update({"mrcd_before": before, "mrcd_after": after,
                  "outage_s": rnd(start["t_applied_s"] - kill["t_start_s"], 2)})
    r.main = ("goodput during the mrcd outage / before", r.fig["ratio"], "")
    r.check("mrcd ran on every host before (pid, XDP program attached)",
            before and all(v["pid"] > 0 and all(x > 0 for x in v["xdp_prog_ids"]) for v in before.values()),
            before)
    r.check("mrcd killed (SIGKILL) on every host", kill.get("exit") == 0, kill.get("output", "").strip() or 0)
    r.check("mrcd restarted on every host", start.get("exit") == 0, start.get("output", "").strip()[-300:] or 0)
    r.check("after the restart: new pids, restart counted, the same XDP programs still attached",
            set(after) == set(before) and all(
                after[n]["pid"] > 0 and after[n]["pid"] != before[n]["pid"] and (after[n]["restarts"] or 0) >= 1
                and after[n]["xdp_prog_ids"] == before[n]["xdp_prog_ids"] for n in before),
            after)


def eval_quiet(run, r, s):
    """No fault: how often a healthy plane or EV is retired (issue 21)."""
    t, v = run.app_t, run.app_v
    lo, hi = 1.0, run.end - 0.3
    gp = median(bins(t, v, lo, hi))
    stall = longest_stall_ms(t, v, 0.5, hi)
    secs = max(hi - lo, 0.001)
    planes = r.fig.get("plane_suspects") or 0
    r.fig.update({"pre_gbps": rnd(gp), "during_gbps": rnd(gp), "after_gbps": None, "ratio": 1.0,
                  "min_100ms_gbps": rnd(min(bins(t, v, lo, hi), default=None)),
                  "min_10ms_gbps": rnd(min((x for _, x in window(t, v, lo, hi)), default=None)),
                  "zero_10ms_bins_during": sum(1 for _, x in window(t, v, lo, hi) if x <= 0),
                  "longest_stall_ms": stall, "window_s": rnd(secs, 2),
                  "plane_retirements_per_min": rnd(planes * 60 / secs, 2),
                  "evs_retired_per_s": rnd((r.fig.get("evs_retired") or 0) / secs, 1)})
    r.main = ("plane retirements", planes, "")
    r.check(f"at most {s['max_plane_retirements']} plane retirement(s) in {rnd(secs, 1)} s with no fault",
            planes <= s["max_plane_retirements"], planes, floor=True)
    r.check(f"no stall longer than {s['max_stall_ms']} ms (10 ms bins without data)", stall <= s["max_stall_ms"],
            f"{stall} ms", floor=True)


# ---------------------------------------------------------------------------
# The suite

SUITE = {
    "01-link-down": dict(
        title="one fabric link down mid-transfer (clos leaf-spine link p1-l0-s0, 3 s)",
        eval=eval_window, fault="link p1-l0-s0 down", clear="link p1-l0-s0 up", min_ratio=0.5, max_stall_ms=500),
    "02-spine-down": dict(
        title="a spine fails (every link of plane 1's spine 0, 3 s)",
        eval=eval_window, fault="link p1-l*-s0 down", clear="link p1-l*-s0 up", min_ratio=0.5, max_stall_ms=500),
    "03-port-down-up": dict(
        title="a host port (plane 2) fails for 2 s and returns",
        eval=eval_plane_return, fault="plane 2 down", clear="plane 2 up", plane=2, min_ratio=0.5, max_stall_ms=500),
    "04-flap": dict(
        title="plane 1's link flaps every 500 ms for 20 s",
        eval=eval_window, fault="link p1 flap", clear=None, min_ratio=0.4, max_stall_ms=500),
    "05-path-loss20": dict(
        title="20% loss on one path (clos link p0-l0-s0, both directions, 4 s)",
        eval=eval_window, fault="link p0-l0-s0 loss", clear="link p0-l0-s0 clear", min_ratio=0.5, max_stall_ms=500),
    "06-plane-loss5": dict(
        title="5% loss on one plane (plane 1, both directions, 4 s)",
        eval=eval_window, fault="plane 1 loss", clear="plane 1 heal", min_ratio=0.5, max_stall_ms=500,
        target_ratio=0.95),
    "07-all-loss1": dict(
        title="1% loss on every plane (both directions, 4 s)",
        eval=eval_window, fault="plane 0 loss", clear="plane 0 heal", min_ratio=0.4, max_stall_ms=500),
    "08-incast": dict(
        title="7-to-1 incast with trimming on the last hop, and a victim flow (clos, 2 planes)",
        eval=eval_incast, target="B", victim="J", victim_client="A", trim_links="p*-b",
        capacity_gbps=1.8, min_victim_ratio=0.3, min_utilisation=0.3),
    "09-ecn-spine": dict(
        title="ECN-marked hot spot on one spine (spine 0 of every plane marks beyond 100 Mbit/s, 4 s)",
        eval=eval_ecn, fault="link p*-l1-s0 rev ecn", clear="link p*-l1-s0 rev clear",
        hot="p*-l1-s0", cool="p*-l1-s1", min_ratio=0.25, max_stall_ms=500),
    "10-mrcd-restart": dict(
        title="mrcd killed and restarted mid-transfer",
        eval=eval_mrcd, fault="exec A: {scndir}/mrcd.sh kill", clear="exec A: {scndir}/mrcd.sh start",
        status="exec A: {scndir}/mrcd.sh status", min_ratio=0.5, max_stall_ms=500, needs_mrcd=True),
    "11-reverse-loss": dict(
        title="reverse path only: B->A on plane 1 blackholed (ACKs, probe responses; 4 s)",
        eval=eval_window, fault="link p1 rev blackhole", clear="link p1 rev clear", min_ratio=0.5, max_stall_ms=500),
    "12-mtu-blackhole": dict(
        title="a lower MTU (1500) inside plane 1's path: probes pass, data frames do not (4 s)",
        eval=eval_window, fault="plane 1 mtu", clear="plane 1 heal", min_ratio=0.5, max_stall_ms=500,
        target_ratio=0.95),
    "13-subset-loss": dict(
        title="50% loss on a quarter of plane 1's paths (UDP source ports p & 3 == 0), none on the rest (4 s)",
        eval=eval_window, fault="plane 1 loss", clear="plane 1 heal", min_ratio=0.5, max_stall_ms=500,
        target_ratio=0.95),
    "14-subset-loss-active": dict(
        title="the same with every EV active (no backups: a readmitted EV is back in the spray at once)",
        eval=eval_window, fault="plane 1 loss", clear="plane 1 heal", min_ratio=0.5, max_stall_ms=500,
        target_ratio=0.95),
    "15-quiet": dict(
        title="no fault for 30 s (4 planes): at most one plane retirement",
        eval=eval_quiet, max_plane_retirements=1, max_stall_ms=500),
    # Partial faults (issue 21, section 1): one direction of a plane lossy,
    # a plane flapping faster than a probe round. usable_planes: what the
    # planes can still carry (2% loss on one of four: 3.98); min_remaining:
    # the liveness bound, below the 0.95 where the engine misses it
    # on this host (resilience.md, "Partial faults").
    "16-data-loss2": dict(
        title="2% loss on plane 1's data direction only (A -> B; ACKs pass), 3 s",
        eval=eval_window, fault="link p1 fwd loss", clear="link p1 fwd clear", min_ratio=0.5, max_stall_ms=500,
        usable_planes=3.98, min_remaining=0.5),
    "17-data-loss5": dict(
        title="5% loss on plane 1's data direction only (A -> B; ACKs pass), 3 s",
        eval=eval_window, fault="link p1 fwd loss", clear="link p1 fwd clear", min_ratio=0.5, max_stall_ms=500,
        usable_planes=3.95, min_remaining=0.5),
    "18-ack-loss5": dict(
        title="5% loss on plane 1's acknowledgement direction only (B -> A; data passes), 3 s",
        eval=eval_window, fault="link p1 rev loss", clear="link p1 rev clear", min_ratio=0.5, max_stall_ms=500,
        usable_planes=4.0, min_remaining=0.5),
    # 19: the liveness bound is 0.4: on the quiet CI machine of 2026-12-03 it
    # kept 0.44-0.47 of before in 3 of 8 runs (0.5 and more in the others),
    # with no ACK timeout or QP error; the 0.95 is a bench target.
    "19-flicker5ms": dict(
        title="plane 1 drops everything 2.5 ms of every 5 ms (flapping faster than a probe round), 3 s",
        eval=eval_window, fault="link p1 flicker", clear="link p1 clear", min_ratio=0.4, max_stall_ms=500,
        usable_planes=3.5, min_remaining=0.4),
    "20-flicker20ms": dict(
        title="plane 1 drops everything 10 ms of every 20 ms, 3 s",
        eval=eval_window, fault="link p1 flicker", clear="link p1 clear", min_ratio=0.5, max_stall_ms=500,
        usable_planes=3.5, min_remaining=0.5),
    # 21, 22: 19 and 20 with the no-fault control interleaved (eval_alternating).
    "21-flicker5ms-alt": dict(
        title="19's flap for 250 ms, clean for 250 ms, 8 times: each flapping span against the clean ones beside it",
        eval=eval_alternating, fault="link p1 flicker", clear="link p1 clear", spans=8, span_s=0.25,
        usable_planes=3.5, min_remaining=0.4, max_stall_ms=500),
    "22-flicker20ms-alt": dict(
        title="20's flap for 250 ms, clean for 250 ms, 8 times: each flapping span against the clean ones beside it",
        eval=eval_alternating, fault="link p1 flicker", clear="link p1 clear", spans=8, span_s=0.25,
        usable_planes=3.5, min_remaining=0.5, max_stall_ms=500),
    # 23 and 24: 21 and 22 on planes shaped to 500 Mbit/s (their scenario
    # files, `shape` replacing the topology's). At 4 x 1 Gbit/s the client's
    # engine thread is busy for the whole second on a 2-core VM; here it has
    # some time to spare, so the pair tells what the flap costs the protocol
    # from what it costs a CPU-bound sender (resilience.md, "Partial faults").
    "23-flicker5ms-alt-500m": dict(
        title="21 on planes of 500 Mbit/s: the flap's cost with the sender's CPU to spare",
        scn="21-flicker5ms-alt", shape="500mbit",
        eval=eval_alternating, fault="link p1 flicker", clear="link p1 clear", spans=8, span_s=0.25,
        usable_planes=3.5, min_remaining=0.4, max_stall_ms=500),
    "24-flicker20ms-alt-500m": dict(
        title="22 on planes of 500 Mbit/s",
        scn="22-flicker20ms-alt", shape="500mbit",
        eval=eval_alternating, fault="link p1 flicker", clear="link p1 clear", spans=8, span_s=0.25,
        usable_planes=3.5, min_remaining=0.5, max_stall_ms=500),
}


def plane_gbps(spec):
    """A plane's rate in Gbit/s: the entry's `shape`, read as the scenario
    runner reads a topology's (scenario.rate_bps: ScenarioError naming the
    rate when it is not one), else 1."""
    return scenario.rate_bps(spec.get("shape", "1gbit"), "suite entry's shape") / 1e9


def scn_path(name):
    """The scenario file of a suite entry: its own, or the one it reuses (`scn`)."""
    return os.path.join(HERE, SUITE.get(name, {}).get("scn", name) + ".scn")


def tool_dirs(build):
    return [os.path.join(build, d) for d in ("user/tools", "selftests/fabric", "bench", "user/mrcd")]


def find_tool(build, name):
    for d in tool_dirs(build):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def run_one(name, build, out, strict):
    """One scenario; once more when its only misses are figure floors.

    A floor (goodput, a stall, a time; Result.check's floor) is a figure the
    host's own load moves: on this 2-CPU machine a run beside other work
    misses one now and then with nothing wrong in the transport (stops
    31-33's CI). Such a run is run once more and judged exactly as the
    first; a data, error or counter check that fails is never run again."""
    rc, r = run_attempt(name, build, out, strict)
    failed = [c for c in r.checks if not c["ok"]] if r else []
    if rc != 1 or not failed or not all(c["floor"] for c in failed):
        return rc
    print(f"  {name}: only figure floors missed ({'; '.join(c['desc'] for c in failed)}), every data, error "
          f"and counter check passed: run once more, judged the same way", flush=True)
    d = os.path.join(out, name)
    first = os.path.join(out, f".{name}.attempt1")  # out of write_table's glob
    shutil.rmtree(first, ignore_errors=True)
    os.replace(d, first)
    rc, r = run_attempt(name, build, out, strict)
    if os.path.isdir(d):
        os.replace(first, os.path.join(d, "attempt1"))
    res_path = os.path.join(d, "result.json")
    if os.path.exists(res_path):
        with open(res_path) as f:
            res = json.load(f)
        res["first_attempt_missed"] = [f"{c['desc']}: {c['value']}" for c in failed]
        with open(res_path, "w") as f:
            json.dump(res, f, indent=1)
    print(f"  {name}: second run {'passed' if rc == 0 else 'failed'}; the first run's files are in "
          f"{os.path.join(d, 'attempt1')}", flush=True)
    return rc


def run_attempt(name, build, out, strict):
    """Returns (exit code, Result or None when it did not get to the checks)."""
    spec = SUITE[name]
    scn = scn_path(name)
    if not os.path.exists(scn):
        print(f"SKIP {name}: {scn} does not exist")
        return SKIP, None
    if os.geteuid() != 0:
        print(f"SKIP {name}: needs root (network namespaces, XDP)")
        return SKIP, None
    for t in ("ip", "tc", "jq", "ethtool", "gnuplot"):
        if not shutil.which(t):
            print(f"SKIP {name}: {t} is not installed")
            return SKIP, None
    for t in ("mrc_perf", "mrc_fault", "fabric_sample"):
        if not find_tool(build, t):
            print(f"FAIL {name}: {t} is not built under {build}")
            return 1, None
    if spec.get("needs_mrcd") and not (find_tool(build, "mrcd") and find_tool(build, "mrcctl")):
        print(f"SKIP {name}: mrcd and mrcctl are not built under {build} (user/mrcd, user/tools)")
        return SKIP, None
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    print(f"resilience {name}: {spec['title']}", flush=True)
    env = dict(os.environ)
    if VM_DURATION_MUL != 1:
        env["MRC_SCENARIO_DURATION_MUL"] = str(VM_DURATION_MUL)
    if VM_RATE_DIV != 1:
        env["MRC_SCENARIO_RATE_DIV"] = str(VM_RATE_DIV)
        print(f"  MRC_IN_VM=1: the scenario's rates are divided by {VM_RATE_DIV} (1gbit planes run at "
              f"{1000 / VM_RATE_DIV:g} Mbit/s), the transfers last {VM_DURATION_MUL}x its duration", flush=True)
    perf_args = os.environ.get("MRC_RESILIENCE_PERF_ARGS", "").strip()
    if perf_args or spec.get("shape"):
        # A copy of the scenario: the entry's plane rate replacing the
        # topology's (`shape`), and for A/B runs of one build (e.g. "--engine
        # plane_relapse_window_us=0") its mrc_perf workloads with these options.
        with open(scn) as f:
            lines = f.read().split("\n")
        if spec.get("shape"):
            # the topology's shape= replaced, or added when it has none
            shape = "shape=" + spec["shape"]
            lines = [(re.sub(r"\bshape=\S+", shape, ln) if re.search(r"\bshape=", ln) else ln + " " + shape)
                     if ln.startswith("topology") else ln for ln in lines]
        if perf_args:
            lines = [ln + " " + perf_args if re.match(r"workload\s+\w+\s*:\s*mrc_perf\s", ln) else ln
                     for ln in lines]
            print(f"  MRC_RESILIENCE_PERF_ARGS: mrc_perf {perf_args}", flush=True)
        scn = os.path.join(d, name + ".scn")
        with open(scn, "w") as f:
            f.write("\n".join(lines))
    p = subprocess.run([sys.executable, RUNNER, "--build", build, "--out", d, scn],
                       capture_output=True, text=True, timeout=600 * VM_SLOW, env=env)
    with open(os.path.join(d, "runner.log"), "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode == SKIP:
        print(f"SKIP {name}: {p.stderr.strip()}")
        return SKIP, None
    if p.returncode != 0 or not os.path.exists(os.path.join(d, "scenario.json")):
        print(f"FAIL {name}: the scenario runner failed (exit {p.returncode}):\n{p.stderr.strip()}")
        return 1, None
    run = Run(d)
    r = Result(name, spec)
    common_checks(run, r)
    try:
        spec["eval"](run, r, spec)
    except (KeyError, ValueError, ZeroDivisionError, StopIteration) as e:
        r.check(f"figures computed ({type(e).__name__}: {e})", False)
    report(r, run)
    if strict:
        for t in r.targets:
            r.check(f"target: {t['desc']}", t["met"], t["value"])
    res = {"name": name, "title": spec["title"], "ok": r.ok, "checks": r.checks, "targets": r.targets,
           "figures": r.fig, "main": r.main, "scenario": os.path.relpath(scn, os.path.join(HERE, "../../..")),
           "plot": os.path.join(d, "goodput.png"), "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "run": run.j.get("run"), "topology": run.j.get("topology")}
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    write_table(out)
    for c in r.checks:
        print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['desc']}" + (f": {c['value']}" if c["value"] is not None else ""))
    for t in r.targets:
        print(f"  {'met ' if t['met'] else 'MISS'} target: {t['desc']}: {t['value']}")
    print(f"  plot: {res['plot']}\n  table: {os.path.join(out, 'resilience.md')}")
    print(f"{'PASS' if r.ok else 'FAIL'} {name}")
    return (0 if r.ok else 1), r


def report(r, run):
    f = r.fig
    if "pre_gbps" in f:
        print(f"  goodput before {f['pre_gbps']} Gbit/s, during {f['during_gbps']} (ratio {f['ratio']}), "
              f"after {f['after_gbps']}; lowest 100 ms bin {f['min_100ms_gbps']}, lowest 10 ms bin "
              f"{f['min_10ms_gbps']}, empty 10 ms bins {f['zero_10ms_bins_during']} of the {f['window_s']} s window, "
              f"longest stall {f['longest_stall_ms']} ms")
    extra = [k for k in f if k.startswith(("plane_share", "plane_gbit", "plane_back", "hot_", "ce_", "victim",
                                           "incast", "trim", "control_", "fault_zero", "remaining_gbps", "during_over",
                                           "cap_gbps", "spans", "planes_gbps", "other_planes"))]
    if extra:
        print("  " + ", ".join(f"{k} {f[k]}" for k in extra))
    print(f"  retransmissions {f['rtx']}, ACK timeouts {f['timeouts']}, EVs retired {f['evs_retired']} "
          f"{f['evs_retired_by_reason']}, readmitted by probes {f['evs_readmitted']}, demotions undone "
          f"{f['evs_undone']}, ECN/trim skips {f['ev_skips']}, plane suspicions {f['plane_suspects']}, "
          f"NACKs {f['nacks']}")
    print(f"  verified: {f['messages_verified']} messages ({f['bytes_verified'] / 1e6:.0f} MB) checked byte for byte "
          f"on arrival")


def write_table(out):
    results = []
    for p in sorted(glob.glob(os.path.join(out, "*", "result.json"))):
        try:
            with open(p) as f:
                results.append(json.load(f))
        except (OSError, json.JSONDecodeError):
            continue
    with open(os.path.join(out, "resilience.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = ["# mrc resilience suite", "",
             "Application goodput (mrc_perf server, 10 ms samples); every message verified byte for byte.", "",
             "| scenario | result | main figure | goodput before / during (Gbit/s) | longest stall | rtx | ACK timeouts "
             "| EVs retired / readmitted | plane suspicions | verified | targets |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        f = r["figures"]
        main = r.get("main") or ("", "", "")
        bd = f"{f.get('pre_gbps')} / {f.get('during_gbps')}" if "pre_gbps" in f else (
            f"clean spans {f.get('control_gbps')} / {f.get('during_gbps')}" if "spans" in f else
            f"victim {f.get('victim_alone_gbps')} / {f.get('victim_during_gbps')}" if "victim_alone_gbps" in f else "")
        tg = "; ".join(f"{'met' if t['met'] else 'MISSED'}: {t['desc']} ({t['value']})" for t in r["targets"]) or "-"
        stall = f"{f['longest_stall_ms']} ms" if "longest_stall_ms" in f else "-"
        lines.append(f"| {r['name']}: {r['title']} | {'pass' if r['ok'] else 'FAIL'} | {main[0]}: {main[1]} {main[2]} "
                     f"| {bd} | {stall} | {f.get('rtx')} | {f.get('timeouts')} | {f.get('evs_retired')} / "
                     f"{f.get('evs_readmitted')} | {f.get('plane_suspects')} "
                     f"| {f.get('messages_verified')} msgs, {f.get('bytes_verified', 0) / 1e6:.0f} MB "
                     f"| {tg} |")
    lines += ["", "Runs: " + ", ".join(f"{r['name']} {r['date']}" for r in results), ""]
    with open(os.path.join(out, "resilience.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description="mrc resilience suite")
    ap.add_argument("--build", default=os.environ.get("MRC_BUILD_DIR"), help="build directory (MRC_BUILD_DIR)")
    ap.add_argument("--out", default=None, help="results directory (default BUILD/resilience)")
    ap.add_argument("--strict", action="store_true", default=os.environ.get("MRC_RESILIENCE_STRICT") == "1",
                    help="a missed target fails the run")
    ap.add_argument("cmd", choices=("run", "table", "list"))
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    if a.cmd == "list":
        # Also checks every entry: its scenario file exists, its plane rate reads.
        bad = 0
        for n, s in SUITE.items():
            try:
                rate = f"{plane_gbps(s):g} Gbit/s"
            except scenario.ScenarioError as e:
                rate, bad = f"({e})", bad + 1
            missing = not os.path.exists(scn_path(n))
            bad += missing
            print(f"{n:18} {rate:12} {s['title']}" + ("  (no scenario file)" if missing else ""))
        return 2 if bad else 0
    if not a.build and a.cmd == "run":
        print("resilience: give --build or set MRC_BUILD_DIR", file=sys.stderr)
        return 2
    out = a.out or os.path.join(a.build or ".", "resilience")
    os.makedirs(out, exist_ok=True)
    if a.cmd == "table":
        write_table(out)
        print(os.path.join(out, "resilience.md"))
        return 0
    names = list(SUITE) if a.names == ["all"] else a.names
    if not names:
        ap.error("run NAME... (or all)")
    rcs = []
    for n in names:
        if n not in SUITE:
            print(f"resilience: unknown scenario '{n}' (resilience.py list)", file=sys.stderr)
            return 2
        rcs.append(run_one(n, os.path.abspath(a.build), out, a.strict))
    if any(rc == 1 for rc in rcs):
        return 1
    return SKIP if all(rc == SKIP for rc in rcs) else 0


if __name__ == "__main__":
    sys.exit(main())
