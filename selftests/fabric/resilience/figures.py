#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
"""Resilience figures: MRC (mrc_perf) against MPTCP (tcp_peer) on the same
fabric, in the same session, interleaved (Python standard library only).

    figures.py [--build DIR] [--out DIR] [--runs N] [--shape RATE] [--img DIR] [--engine K=V ...]
               [--perf-arg OPTION ...]

Runs figures/{mrc,mptcp}-{blackhole,loss5}.scn N times each, in the order
mrc-blackhole, mptcp-blackhole, mrc-loss5, mptcp-loss5, N rounds (so the
machine's drifting speed hits both alike), computes per run:

  (t = 0 of a fault: when its map update was in place, mrc_fault's updated_mono_ns)
  blackhole (plane 2 of 4 at 3 s):
    remaining capacity  min(pre-fault goodput, 3 planes x shaped rate x the
                        goodput/wire ratio measured before the fault): what
                        the three planes left can carry, capped by what the
                        hosts delivered before (the CPU, when it is the limit)
    min bin             lowest 10 ms bin in the second after the fault,
                        relative to the remaining capacity (target >= 0.5)
    reach               from the fault to the end of its dip: the first 10 ms
                        bin, after the first one below 90% of the remaining
                        capacity (within 200 ms; none: 0 ms), from which the
                        next 50 ms average >= 90% again (target <= 20 ms)
  5% loss (plane 1, 3 s to 7 s):
    ratio               median 100 ms bin during / before (target >= 0.95)
    empty bins          10 ms bins without goodput during the loss (target 0)

and writes OUT/figures.json (every run, the medians and ranges),
OUT/figures.md (the table) and OUT/{blackhole,loss5}.png (the median runs of
MRC and MPTCP, goodput and per-plane wire rates); --img copies the PNGs
there. --engine passes engine tunables to both mrc_perf ends.
Documentation/resilience.md shows the results.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import resilience as rs  # noqa: E402

ORDER = ["mrc-blackhole", "mptcp-blackhole", "mrc-loss5", "mptcp-loss5"]


def rate_gbps(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(mbit|gbit)", s)
    if not m:
        raise SystemExit(f"figures: bad --shape '{s}' (use 250mbit or 1gbit)")
    return float(m.group(1)) * (1.0 if m.group(2) == "gbit" else 1e-3)


def prepare(name, out, shape, engine, perf_args):
    """The scenario file, with the shaping rate, engine tunables and extra
    mrc_perf options (both ends) applied."""
    with open(os.path.join(HERE, "figures", name + ".scn")) as f:
        text = f.read()
    text = re.sub(r"shape=\S+", f"shape={shape}", text)
    extra = " ".join([f"--engine {e}" for e in engine] + perf_args)
    if extra and name.startswith("mrc"):
        text = re.sub(r"(mrc_perf (server|client) [^\n]*)", lambda m: m.group(1) + " " + extra, text)
    p = os.path.join(out, "scn", name + ".scn")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)
    return p


def blackhole_figures(run, planes, plane_gbps):
    # t: when the fault programs had the blackhole configuration (mrc_fault's
    # updated_mono_ns; the runner's t_effect_s)
    f = run.fault("plane 2 blackhole")
    t = rs.t_effect(f)
    at, av = run.app_t, run.app_v
    pre = rs.median(rs.bins(at, av, 1.0, t))
    wire_pre = rs.median(rs.bins(run.wire_t, run.wire_v, 1.0, t))
    eff = min(1.0, pre / wire_pre) if pre and wire_pre else 1.0
    remaining = min(pre, (planes - 1) * plane_gbps * eff)
    post = rs.window(at, av, t, t + 1.0)
    min_bin = min((v for _, v in post), default=None)
    # The dip: from the first 10 ms bin below 90% of the remaining capacity
    # (within 200 ms of the fault; none: 0 ms) to the first bin from which
    # the next 50 ms average at least 90% again.
    reach = 0.0
    dip = next((i for i, (tt, v) in enumerate(post) if tt < t + 0.2 and v < 0.9 * remaining), None)
    if dip is not None:
        reach = None
        for i in range(dip, len(post) - 4):
            if statistics.mean(v for _, v in post[i:i + 5]) >= 0.9 * remaining:
                reach = max(0.0, round((post[i][0] - 0.01 - t) * 1000, 1))
                break
    heal = rs.t_effect(run.fault("plane 2 heal"))
    dur = rs.median(rs.bins(at, av, t, heal))
    below_half = sum(1 for _, v in post if v < 0.5 * remaining)
    first = post[:10]  # the first 100 ms: the fault's own transient
    min_first = min((v for _, v in first), default=None)
    # the same statistics over the second before the fault: what this host's
    # scheduling does to 10 ms bins with nothing failing
    base = rs.window(at, av, t - 1.0, t)
    base_min = min((v for _, v in base), default=None)
    ev = ev_figures(run, t, port=3)
    return {**ev, "baseline_min_bin_rel": rs.rnd(rs.ratio(base_min, pre)),
            "baseline_bins_below_half_1s": sum(1 for _, v in base if v < 0.5 * pre),"pre_gbps": rs.rnd(pre), "goodput_per_wire": rs.rnd(eff), "remaining_gbps": rs.rnd(remaining),
            "min_bin_gbps": rs.rnd(min_bin), "min_bin_rel": rs.rnd(rs.ratio(min_bin, remaining)),
            "bins_below_half_1s": below_half, "reach_ms": reach,
            "min_bin_100ms_rel": rs.rnd(rs.ratio(min_first, remaining)),
            "bins_below_half_100ms": sum(1 for _, v in first if v < 0.5 * remaining),
            "during_median_gbps": rs.rnd(dur), "during_rel": rs.rnd(rs.ratio(dur, remaining)),
            "longest_stall_ms": rs.longest_stall_ms(at, av, t, heal),
            "target_min_bin": bool(min_bin is not None and min_bin >= 0.5 * remaining),
            "target_reach": bool(reach is not None and reach <= 20)}


def loss_figures(run):
    f = run.fault("plane 1 loss")
    c = run.fault("plane 1 heal")
    t, e = rs.t_effect(f), rs.t_effect(c)
    at, av = run.app_t, run.app_v
    pre = rs.median(rs.bins(at, av, 1.0, t))
    dur_bins = rs.bins(at, av, t, e)
    dur = rs.median(dur_bins)
    w = rs.window(at, av, t, e)
    empty = sum(1 for _, v in w if v <= 0)
    base = rs.window(at, av, 1.0, t)
    return {**ev_figures(run, t, port=2),
            "baseline_empty_bins_per_4s": rs.rnd(sum(1 for _, v in base if v <= 0) * 4.0 / max(t - 1.0, 0.1), 1),"pre_gbps": rs.rnd(pre), "during_gbps": rs.rnd(dur), "ratio": rs.rnd(rs.ratio(dur, pre)),
            "empty_bins": empty, "min_bin_gbps": rs.rnd(min((v for _, v in w), default=None)),
            "min_100ms_rel": rs.rnd(rs.ratio(min(dur_bins) if dur_bins else None, pre)),
            "longest_stall_ms": rs.longest_stall_ms(at, av, t, e),
            "target_ratio": bool((rs.ratio(dur, pre) or 0) >= 0.95), "target_empty": empty == 0}


def ev_figures(run, t_fault, port):
    """From the client's EV log: how long after the fault the faulted plane
    was retired as a whole (plane suspicion), and what the engine retired
    before the fault, on a fabric where nothing had failed yet."""
    evs = rs.ev_log(run)
    if not evs:
        return {}
    pre = [e for e in evs if e["t_s"] < t_fault]
    post = [e for e in evs if e["t_s"] >= t_fault]
    plane = [e for e in post if e["port"] == port and e["reason"] == "plane_loss"]
    first = [e for e in post if e["port"] == port and e["to"] == "ASSUMED_BAD" and e["from"] != "ASSUMED_BAD"]
    c = rs.ev_counts(evs)
    return {"evs_retired": c["evs_retired"], "evs_readmitted": c["evs_readmitted"],
            "first_retire_ms": rs.rnd((first[0]["t_s"] - t_fault) * 1000, 1) if first else None,
            "plane_retired_ms": rs.rnd((plane[0]["t_s"] - t_fault) * 1000, 1) if plane else None,
            "prefault_retired_per_s": rs.rnd(sum(1 for e in pre if e["to"] == "ASSUMED_BAD" and e["from"] != "ASSUMED_BAD")
                                             / max(t_fault, 0.1), 1),
            "prefault_plane_suspicions": len({round(e["t_s"], 3) for e in pre if e["reason"] == "plane_loss"})}


def verified(run):
    """Both ends verified and exited 0 (mrc_perf: server and client summaries;
    tcp_peer: the server's verify and every exit code)."""
    ok = all(w.get("exit") == 0 for w in run.workloads)
    for w in run.workloads:
        s = w.get("summary") or {}
        if "verify" in s and s["verify"] != "ok":
            ok = False
    if run.servers:
        s = run.servers[0].get("summary") or {}
        ok = ok and s.get("imm_bad") == 0 and s.get("imm_overwritten") == 0 and s.get("bad_slots") == 0
    return ok


def counters(run):
    out = {}
    for c in run.clients:
        s = c.get("summary") or {}
        for k in ("rtx", "timeouts", "plane_suspects", "tlp", "spurious_rtx"):
            out[k] = out.get(k, 0) + s.get(k, 0)
    return out


def summarise(runs, keys):
    out = {}
    for k in keys:
        xs = [r[k] for r in runs if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)]
        if xs:
            out[k] = {"median": rs.rnd(statistics.median(xs)), "min": rs.rnd(min(xs)), "max": rs.rnd(max(xs))}
    for k in [k for k in runs[0] if k.startswith("target_")] if runs else []:
        out[k] = f"{sum(1 for r in runs if r.get(k))}/{len(runs)}"
    return out


def fmt(s, k, unit=""):
    v = s.get(k)
    if not v:
        return "-"
    return f"{v['median']}{unit} ({v['min']}-{v['max']})"


def plot(out, kind, runs_by_name, t_fault, t_clear, ymax):
    """Median runs of MRC and MPTCP: application goodput and per-plane wire rates."""
    png = os.path.join(out, f"{kind}.png")
    g = ["set terminal png size 1000,640 font 'DejaVuSans,9' noenhanced", f"set output '{png}'", "set multiplot layout 2,1",
         "set grid", "set ylabel 'Gbit/s'", "set key outside right top", "set xrange [1.5:8.5]",
         f"set yrange [0:{ymax:g}]"]
    for name in (f"mrc-{kind}", f"mptcp-{kind}"):
        r = runs_by_name.get(name)
        if not r:
            continue
        d = os.path.join(out, name + ".dat")
        j = json.load(open(os.path.join(r["dir"], "scenario.json")))
        s, w = j["samples"], j["workload_samples"]
        with open(d, "w") as f:
            for i, t in enumerate(s["t_s"]):
                f.write(f"{t:.4f} " + " ".join(f"{s['planes_gbps'][p][i]:.4f}" for p in sorted(s["planes_gbps"])) + "\n")
        with open(d + ".app", "w") as f:
            for t, v in zip(w["t_s"], w["gbps"]):
                f.write(f"{t:.4f} {v:.4f}\n")
        who = "MRC (mrc_perf, 1 QP)" if name.startswith("mrc") else "MPTCP (tcp_peer, 4 subflows, cubic)"
        g.append(f"set title '{who}: {r['label']}'")
        g.append("unset arrow")
        for t in (t_fault(r), t_clear(r)):
            g.append(f"set arrow from {t},graph 0 to {t},graph 1 nohead lc rgb 'red' dt 2")
        if r.get("remaining"):
            g.append(f"set arrow from {t_fault(r)},{r['remaining']} to {t_clear(r)},{r['remaining']} nohead "
                     "lc rgb 'dark-green' dt 3")
        cols = [f"'{d}.app' using 1:2 with lines lw 1.5 lc rgb 'black' title 'goodput (10 ms)'"]
        for i, p in enumerate(sorted(j["samples"]["planes_gbps"])):
            cols.append(f"'{d}' using 1:{2 + i} with lines lw 0.7 title 'plane {p} (wire)'")
        g.append("plot " + ", ".join(cols))
    g.append("unset multiplot")
    rr = subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True, capture_output=True, timeout=60)
    if rr.returncode != 0:
        raise SystemExit(f"figures: gnuplot: {rr.stderr.strip()}")
    return png


def main():
    ap = argparse.ArgumentParser(description="resilience figures, MRC against MPTCP")
    ap.add_argument("--build", default=os.environ.get("MRC_BUILD_DIR"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--shape", default="1gbit")
    ap.add_argument("--img", default=None, help="copy the PNGs here (as resilience-<shape>-<kind>.png)")
    ap.add_argument("--engine", action="append", default=[], help="mrc_perf --engine K=V (both ends)")
    ap.add_argument("--perf-arg", action="append", default=[], help="another mrc_perf option (both ends), e.g. '-t 64'")
    ap.add_argument("--reanalyse", action="store_true", help="recompute from the runs already in OUT")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("figures: needs root", file=sys.stderr)
        return rs.SKIP
    if not a.build:
        print("figures: give --build or set MRC_BUILD_DIR", file=sys.stderr)
        return 2
    build = os.path.abspath(a.build)
    out = os.path.abspath(a.out or os.path.join(build, f"resilience-figures-{a.shape}"))
    os.makedirs(out, exist_ok=True)
    plane = rate_gbps(a.shape)
    scns = {n: prepare(n, out, a.shape, a.engine, a.perf_arg) for n in ORDER}
    runs = {n: [] for n in ORDER}
    old = {}
    if a.reanalyse:
        with open(os.path.join(out, "figures.json")) as f:
            old = json.load(f)["all"]
    for i in range(a.runs):
        for n in ORDER:
            d = os.path.join(out, f"{n}.{i}")
            if a.reanalyse:
                p = subprocess.CompletedProcess([], 0 if os.path.exists(os.path.join(d, "scenario.json")) else 1,
                                                "", "no scenario.json")
                load1 = next((r.get("load1") for r in old.get(n, []) if r.get("run") == i), None)
            else:
                with open("/proc/loadavg") as f:
                    load1 = float(f.read().split()[0])
                shutil.rmtree(d, ignore_errors=True)
                p = subprocess.run([sys.executable, rs.RUNNER, "--build", build, "--out", d, scns[n]],
                                   capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                print(f"{n} run {i}: runner failed ({p.returncode}): {p.stderr.strip()[-500:]}", flush=True)
                runs[n].append({"run": i, "dir": d, "failed": True})
                continue
            run = rs.Run(d)
            fig = blackhole_figures(run, 4, plane) if "blackhole" in n else loss_figures(run)
            fig.update({"run": i, "dir": d, "verified": verified(run), "load1": load1, **counters(run)})
            runs[n].append(fig)
            print(f"{n} run {i}: " + ", ".join(f"{k} {v}" for k, v in fig.items() if k != "dir"), flush=True)
    common = ["rtx", "timeouts", "evs_retired", "evs_readmitted", "plane_suspects", "tlp", "spurious_rtx",
              "first_retire_ms", "plane_retired_ms", "prefault_retired_per_s", "prefault_plane_suspicions", "load1"]
    bh_keys = ["pre_gbps", "remaining_gbps", "min_bin_gbps", "min_bin_rel", "bins_below_half_1s", "reach_ms",
               "min_bin_100ms_rel", "bins_below_half_100ms",
               "during_rel", "longest_stall_ms", "baseline_min_bin_rel", "baseline_bins_below_half_1s"] + common
    ls_keys = ["pre_gbps", "during_gbps", "ratio", "empty_bins", "min_bin_gbps", "min_100ms_rel", "longest_stall_ms",
               "baseline_empty_bins_per_4s"] + common
    summary = {}
    for n in ORDER:
        good = [r for r in runs[n] if not r.get("failed")]
        summary[n] = summarise(good, bh_keys if "blackhole" in n else ls_keys)
        summary[n]["runs"] = len(runs[n])
        summary[n]["failed_runs"] = len(runs[n]) - len(good)
        summary[n]["verified"] = f"{sum(1 for r in good if r['verified'])}/{len(runs[n])}"
    # the median run of each scenario for the plots (by the goodput during
    # the fault relative to the remaining capacity / to before the fault)
    med = {}
    for n in ORDER:
        good = [r for r in runs[n] if not r.get("failed")]
        key = "during_rel" if "blackhole" in n else "ratio"
        good = sorted((r for r in good if r.get(key) is not None), key=lambda r: r[key])
        if good:
            r = dict(good[len(good) // 2])
            r["label"] = (f"run {r['run']}, lowest 10 ms bin {r['min_bin_gbps']} Gbit/s, "
                          f"{r['reach_ms']} ms to 90% of {r['remaining_gbps']} Gbit/s" if "blackhole" in n else
                          f"run {r['run']}, during/before {r['ratio']}, {r['empty_bins']} empty 10 ms bins")
            r["remaining"] = r.get("remaining_gbps")
            med[n] = r

    def tf(kind):
        return lambda r: rs.t_effect(rs.Run(r["dir"]).fault("plane 2 blackhole" if kind == "blackhole" else "plane 1 loss"))

    def tc(kind):
        return lambda r: rs.t_effect(rs.Run(r["dir"]).fault("plane 2 heal" if kind == "blackhole" else "plane 1 heal"))

    ymax = max(1.0, round(4 * plane * 1.25, 1))
    pngs = [plot(out, k, med, tf(k), tc(k), ymax) for k in ("blackhole", "loss5")]
    res = {"shape": a.shape, "planes": 4, "runs": a.runs, "engine": a.engine, "perf_args": a.perf_arg,
           "summary": summary, "all": runs,
           "plots": pngs}
    with open(os.path.join(out, "figures.json"), "w") as f:
        json.dump(res, f, indent=1)
    opts = " ".join([f"--engine {e}" for e in a.engine] + a.perf_arg)
    lines = [f"Shaping {a.shape} per plane, 4 planes, {a.runs} interleaved runs each; median (min-max)."
             + (f" mrc_perf options added: `{opts}`." if opts else ""), "",
             "| plane 2 blackholed | pre-fault goodput (Gbit/s) | remaining capacity (Gbit/s) | lowest 10 ms bin / remaining "
             "(1 s; first 100 ms) | 10 ms bins < half (1 s; first 100 ms) | to 90% of remaining (ms) "
             "| median during / remaining | longest stall (ms) "
             "| targets met (min bin, 20 ms) | no fault: lowest bin / pre, bins < half (1 s before) | verified |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n in ("mrc-blackhole", "mptcp-blackhole"):
        s = summary[n]
        lines.append(f"| {'MRC' if n.startswith('mrc') else 'MPTCP'} | {fmt(s, 'pre_gbps')} | {fmt(s, 'remaining_gbps')} "
                     f"| {fmt(s, 'min_bin_rel')}; {fmt(s, 'min_bin_100ms_rel')} "
                     f"| {fmt(s, 'bins_below_half_1s')}; {fmt(s, 'bins_below_half_100ms')} | {fmt(s, 'reach_ms')} "
                     f"| {fmt(s, 'during_rel')} | {fmt(s, 'longest_stall_ms')} "
                     f"| {s.get('target_min_bin', '-')}, {s.get('target_reach', '-')} "
                     f"| {fmt(s, 'baseline_min_bin_rel')}, {fmt(s, 'baseline_bins_below_half_1s')} | {s['verified']} |")
    lines += ["", "| 5% loss on plane 1 | pre-fault goodput (Gbit/s) | during (Gbit/s) | during / before | empty 10 ms bins "
              "| lowest 100 ms bin / before | longest stall (ms) | targets met (0.95, no empty bin) "
              "| no fault: empty bins per 4 s | verified |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n in ("mrc-loss5", "mptcp-loss5"):
        s = summary[n]
        lines.append(f"| {'MRC' if n.startswith('mrc') else 'MPTCP'} | {fmt(s, 'pre_gbps')} | {fmt(s, 'during_gbps')} "
                     f"| {fmt(s, 'ratio')} | {fmt(s, 'empty_bins')} | {fmt(s, 'min_100ms_rel')} "
                     f"| {fmt(s, 'longest_stall_ms')} | {s.get('target_ratio', '-')}, {s.get('target_empty', '-')} "
                     f"| {fmt(s, 'baseline_empty_bins_per_4s')} | {s['verified']} |")
    lines += ["", "MRC counters (client, per run): median (min-max)", "",
              "| scenario | retransmissions | ACK timeouts | EVs retired | readmitted | plane suspicions | TLPs "
              "| spurious rtx | fault -> first EV retired (ms) | fault -> plane retired (ms) "
              "| before the fault: EVs retired per s, plane suspicions | load average |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n in ("mrc-blackhole", "mrc-loss5"):
        s = summary[n]
        lines.append(f"| {n} | {fmt(s, 'rtx')} | {fmt(s, 'timeouts')} | {fmt(s, 'evs_retired')} "
                     f"| {fmt(s, 'evs_readmitted')} | {fmt(s, 'plane_suspects')} | {fmt(s, 'tlp')} "
                     f"| {fmt(s, 'spurious_rtx')} | {fmt(s, 'first_retire_ms')} | {fmt(s, 'plane_retired_ms')} "
                     f"| {fmt(s, 'prefault_retired_per_s')}, {fmt(s, 'prefault_plane_suspicions')} | {fmt(s, 'load1')} |")
    with open(os.path.join(out, "figures.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if a.img:
        os.makedirs(a.img, exist_ok=True)
        for p in pngs:
            shutil.copy(p, os.path.join(a.img, f"resilience-{a.shape}-{os.path.basename(p)}"))
    print("\n".join(lines))
    print(f"\n{os.path.join(out, 'figures.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
