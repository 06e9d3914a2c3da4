#!/usr/bin/env python3
"""Each plane's share of what an mrc_perf client sent, from a resilience run.

Run a scenario with the client sampling, then read its samples:

  MRC_RESILIENCE_PERF_ARGS="--sample-ms 5" python3 \\
      selftests/fabric/resilience/resilience.py --build build --out DIR run 19-flicker5ms
  bench/plane_share.py DIR 19-flicker5ms --window 2.6,5.4
  bench/plane_share.py DIR 20-flicker20ms --period 20 --plane 1
  bench/plane_share.py DIR 21-flicker5ms-alt --spans

The client's sample lines (`"dir":"tx"`) carry `t_ms` (since the client's
start), `mono_ns`, and `planes`: the bytes sent on each plane in the sample.
Without --window the window is the scenario's first fault's effect plus
0.1 s to its second action's effect less 0.05 s (scenario.json).

Prints the goodput sent (Gbit/s), each plane's share and the median of the
sender's window (`cwnd`, when the samples carry it) over the window; with
--period MS, also the share of plane --plane (0-based, as in `planes`) in
each millisecond of the period, counted from the fault's effect (a flap
starts with its down phase); with --rates as well, per millisecond of the
period each plane's sending rate (Gbit/s) and the sender's mean smoothed
RTT (us), for 1 ms samples (--sample-ms 1). With --spans (a scenario that
switches its fault on and off in turn, as 21 and 22 do: its events
alternate fault, clear, fault ...), the client's samples wholly inside the
faulted spans against those inside the clean ones: each plane's sending
rate, the median window, bytes in flight and smoothed RTT, and quick adapt's
cuts and the retransmissions per millisecond. Used by results-log.md,
"2026-12-04 23:45 to 12-05 00:40", "2026-12-05 01:23-01:28",
"2026-12-05 08:00-08:50" and "2026-12-05 13:46-15:11".
"""
import argparse
import json
import os
import sys


def samples(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith('{"dir"'):
                r = json.loads(line)
                if r.get("dir") == "tx" and "planes" in r:
                    out.append(r)
    return out


def fault_times(scenario):
    """The fault's and the heal's effect, seconds on the runner's clock (t0_mono_ns)."""
    faults = scenario.get("faults") or []
    if len(faults) < 2:
        raise SystemExit("plane_share: the scenario has no fault and heal; pass --window")
    return faults[0]["t_effect_s"], faults[1]["t_effect_s"]


def median_of(xs):
    """The upper median (a value the samples hold), None without samples."""
    return sorted(xs)[len(xs) // 2] if xs else None


def window_note(rows, select):
    """", median window N B" over the rows `select` keeps that carry the
    sender's window (`cwnd`), or nothing."""
    w = median_of([r["cwnd"] for r in rows if select(r) and "cwnd" in r])
    return "" if w is None else f", median window {w} B"


def shares(rows, select):
    """Goodput sent (Gbit/s) and each plane's share over the rows `select` keeps."""
    kept = [r for r in rows if select(r)]
    if not kept:
        return None, []
    planes = [sum(r["planes"][i] for r in kept) for i in range(len(kept[0]["planes"]))]
    total = sum(planes)
    span_ms = kept[-1]["t_ms"] - kept[0]["t_ms"] + (kept[1]["t_ms"] - kept[0]["t_ms"] if len(kept) > 1 else 1)
    gbps = total * 8 / (span_ms / 1000) / 1e9 if span_ms > 0 else None
    return gbps, [p / total if total else 0.0 for p in planes]


def by_phase(rows, t0_ns, effect_s, start_s, end_s, period_ms, plane):
    """The plane's share of the bytes sent in each millisecond of the period
    (counted from the fault's effect), over [start_s, end_s)."""
    acc = [[0, 0] for _ in range(period_ms)]
    for r in rows:
        t = (r["mono_ns"] - t0_ns) / 1e9
        if not start_s <= t < end_s:
            continue
        ph = int((t - effect_s) * 1000) % period_ms
        acc[ph][0] += r["planes"][plane]
        acc[ph][1] += sum(r["planes"])
    return [a / b if b else None for a, b in acc]


def rates_by_phase(rows, t0_ns, effect_s, start_s, end_s, period_ms, plane=1):
    """Per millisecond of the period: each plane's sending rate (Gbit/s), the
    mean smoothed RTT of the samples that end in it (us; None without one)
    and the fraction of those samples in which plane `plane` (0-based, as in
    `planes`; the engine's port plane + 1 in `dark`) was dark. A sample's bytes are spread evenly over the time since the sample
    before it: the client's sampler runs beside a busy engine thread, and
    its samples span 1-7 ms where it was meant to take one per ms."""
    nplanes = len(rows[0]["planes"]) if rows else 0
    acc = [{"bytes": [0.0] * nplanes, "ns": 0.0, "srtt": [], "dark": []} for _ in range(period_ms)]
    eff_ns = t0_ns + effect_s * 1e9
    prev = None
    for r in rows:
        t = (r["mono_ns"] - t0_ns) / 1e9
        if prev is not None and start_s <= t < end_s and r["mono_ns"] > prev:
            span = r["mono_ns"] - prev
            a = prev
            while a < r["mono_ns"]:  # each whole or partial ms the sample spans
                ms = int((a - eff_ns) // 1_000_000)
                b = min(r["mono_ns"], eff_ns + (ms + 1) * 1_000_000)
                if b <= a:  # float rounding at a boundary
                    b = a + 1
                cell = acc[ms % period_ms]
                for i, x in enumerate(r["planes"]):
                    cell["bytes"][i] += x * (b - a) / span
                cell["ns"] += b - a
                a = b
            end_cell = acc[int((t - effect_s) * 1000) % period_ms]
            if r.get("srtt_ns"):
                end_cell["srtt"].append(r["srtt_ns"])
            if "dark" in r:
                end_cell["dark"].append(r["dark"] >> (plane + 1) & 1)
        prev = r["mono_ns"]
    out = []
    for a in acc:
        gbps = [b * 8 / a["ns"] for b in a["bytes"]] if a["ns"] else None
        srtt = sum(a["srtt"]) / len(a["srtt"]) / 1000 if a["srtt"] else None
        dark = sum(a["dark"]) / len(a["dark"]) if a["dark"] else None
        out.append((gbps, srtt, dark))
    return out


def by_span(rows, t0_ns, events_s, end_s):
    """The client's samples in the faulted spans [e0, e1), [e2, e3) ... and
    in the clean ones [e1, e2), [e3, e4) ... (the last to end_s), each
    sample covering the time since the one before: per kind, each plane's
    sending rate (Gbit/s), the median window, bytes in flight and smoothed
    RTT (us), and quick adapt's cuts and the retransmissions per ms."""
    bounds = list(events_s) + [end_s]
    spans = {"faulted": [], "clean": []}
    for i in range(len(bounds) - 1):
        spans["faulted" if i % 2 == 0 else "clean"].append((bounds[i], bounds[i + 1]))
    out = {}
    for kind, sp in spans.items():
        acc = {"ns": 0, "bytes": None, "cwnd": [], "inflight": [], "srtt": [], "qa": 0, "rtx": 0}
        prev = None
        for r in rows:
            if prev is not None:
                a, b = (prev["mono_ns"] - t0_ns) / 1e9, (r["mono_ns"] - t0_ns) / 1e9
                if b > a and any(lo <= a and b <= hi for lo, hi in sp):
                    acc["ns"] += r["mono_ns"] - prev["mono_ns"]
                    acc["bytes"] = [x + y for x, y in zip(acc["bytes"] or [0] * len(r["planes"]), r["planes"])]
                    for k, src in (("cwnd", "cwnd"), ("inflight", "inflight"), ("srtt", "srtt_ns")):
                        if src in r:
                            acc[k].append(r[src])
                    acc["qa"] += r.get("qa_cuts", 0) - prev.get("qa_cuts", 0)
                    acc["rtx"] += r.get("rtx", 0) - prev.get("rtx", 0)
            prev = r
        if not acc["ns"]:
            out[kind] = None
            continue
        ms = acc["ns"] / 1e6
        out[kind] = {"samples_ms": round(ms), "gbps": [round(x * 8 / acc["ns"], 3) for x in acc["bytes"]],
                     "cwnd": median_of(acc["cwnd"]), "inflight": median_of(acc["inflight"]),
                     "srtt_us": round(median_of(acc["srtt"]) / 1000) if acc["srtt"] else None,
                     "qa_per_ms": round(acc["qa"] / ms, 2), "rtx_per_ms": round(acc["rtx"] / ms, 2)}
    return out


def analyse(out_dir, scn, window=None, period=0, plane=1, rates=False, spans=False):
    run = os.path.join(out_dir, scn)
    rows = samples(os.path.join(run, "workload1-A.log"))
    lines = []
    if window:
        lo, hi = window
        sel = lambda r: lo * 1000 <= r["t_ms"] < hi * 1000  # noqa: E731
        gbps, sh = shares(rows, sel)
        lines.append(f"client t {lo}-{hi} s: {gbps:.2f} Gbit/s sent, shares {[round(x, 3) for x in sh]}"
                     + window_note(rows, sel))
    with open(os.path.join(run, "scenario.json")) as f:
        sc = json.load(f)
    t0 = sc["t0_mono_ns"]
    if spans:
        ev = [f["t_effect_s"] for f in sc.get("faults") or []]
        if len(ev) < 2:
            raise SystemExit("plane_share: --spans needs a scenario that switches its fault on and off")
        for kind, e in by_span(rows, t0, ev, ev[-1] + (ev[1] - ev[0])).items():
            lines.append(f"{kind} spans: " + ("no samples" if not e else
                         f"{e['samples_ms']} ms of samples, Gbit/s per plane {e['gbps']}, window {e['cwnd']}, "
                         f"in flight {e['inflight']}, srtt {e['srtt_us']} us, quick adapt cuts {e['qa_per_ms']}/ms, "
                         f"retransmissions {e['rtx_per_ms']}/ms"))
        return lines
    if not window or period:
        effect, heal = fault_times(sc)
        start, end = effect + 0.1, heal - 0.05
        sel = lambda r: start <= (r["mono_ns"] - t0) / 1e9 < end  # noqa: E731
        gbps, sh = shares(rows, sel)
        lines.append(f"fault {start:.2f}-{end:.2f} s: {gbps:.2f} Gbit/s sent, shares {[round(x, 3) for x in sh]}"
                     + window_note(rows, sel))
        if period:
            ph = by_phase(rows, t0, effect, start, end, period, plane)
            lines.append(f"plane {plane} share by ms of the {period} ms period: " +
                         " ".join(f"{i}:{'-' if s is None else f'{s:.2f}'}" for i, s in enumerate(ph)))
            if rates:
                for i, (g, srtt, dark) in enumerate(rates_by_phase(rows, t0, effect, start, end, period, plane)):
                    lines.append(f"ms {i}: Gbit/s per plane " +
                                 ("-" if g is None else " ".join(f"{x:.2f}" for x in g)) +
                                 (f", srtt {srtt:.0f} us" if srtt is not None else "") +
                                 (f", plane {plane} dark in {dark:.2f} of the samples" if dark is not None else ""))
    return lines


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        run = os.path.join(d, "x")
        os.makedirs(run)
        t0 = 1_000_000_000
        with open(os.path.join(run, "scenario.json"), "w") as f:
            json.dump({"t0_mono_ns": t0, "faults": [{"t_effect_s": 1.0}, {"t_effect_s": 2.05}]}, f)
        with open(os.path.join(run, "workload1-A.log"), "w") as f:
            f.write("mrc_perf: a line that is not a sample\n")
            for ms in range(3000):
                t = ms / 1000
                # plane 1 carries nothing in the first 10 ms of every 20 ms of the fault
                down = 1.0 <= t < 2.05 and int((t - 1.0) * 1000) % 20 < 10
                planes = [1000, 0 if down else 1000, 1000, 1000]
                f.write(json.dumps({"dir": "tx", "t_ms": ms, "mono_ns": t0 + ms * 1_000_000,
                                    "planes": planes}) + "\n")
        lines = analyse(d, "x", period=20, plane=1)
        ph = lines[1].split(": ", 1)[1].split()
        assert all(p.endswith("0.00") for p in ph[:10]), lines
        assert all(p.endswith("0.25") for p in ph[10:]), lines
        assert "0.143" in lines[0] and "0.286" in lines[0], lines
        lines = analyse(d, "x", period=20, plane=1, rates=True)
        # 1000 bytes per 1 ms sample: 0.008 Gbit/s; plane 1 none while down
        assert lines[2] == "ms 0: Gbit/s per plane 0.01 0.00 0.01 0.01", lines[2]
        assert lines[12] == "ms 10: Gbit/s per plane 0.01 0.01 0.01 0.01", lines[12]
        # a 4 ms sample is spread over the 4 ms it spans
        rows = [{"mono_ns": t0 + ms * 1_000_000, "planes": [4000 * (ms == 4)]} for ms in (0, 4)]
        g = rates_by_phase(rows, t0, 0.0, 0.0, 1.0, 20)
        assert [round(x[0][0], 6) if x[0] else None for x in g[:5]] == [0.008] * 4 + [None], g[:5]
        # the dark fraction: plane 1 (port 2, bit 2) dark in one of two samples ending in ms 1
        rows = [{"mono_ns": t0 + ns, "planes": [0, 0], "dark": d}
                for ns, d in ((0, 0), (1_200_000, 4), (1_600_000, 2))]
        g = rates_by_phase(rows, t0, 0.0, 0.0, 1.0, 20, plane=1)
        assert g[1][2] == 0.5 and g[0][2] is None, g[:2]
        lines = analyse(d, "x", window=(0.0, 1.0))
        assert "[0.25, 0.25, 0.25, 0.25]" in lines[0] and "0.03 Gbit/s" in lines[0], lines
        assert "median window" not in lines[0], lines  # the samples carry none
        # --spans: faulted [1.0, 2.05), clean [2.05, 3.1): plane 1 sends half
        # of its 0.008 Gbit/s in the faulted span, all of it in the clean one
        lines = analyse(d, "x", spans=True)
        assert lines[0].startswith("faulted spans: 1050 ms") and "[0.008, 0.004, 0.008, 0.008]" in lines[0], lines
        assert lines[1].startswith("clean spans: 949 ms") and "[0.008, 0.008, 0.008, 0.008]" in lines[1], lines
        # the window's median over a window of samples that carry it
        run2 = os.path.join(d, "w")
        os.makedirs(run2)
        with open(os.path.join(run2, "scenario.json"), "w") as f:
            json.dump({"t0_mono_ns": t0, "faults": [{"t_effect_s": 1.0}]}, f)
        with open(os.path.join(run2, "workload1-A.log"), "w") as f:
            for ms, cw in ((0, 4096), (1, 8192), (2, 65536)):
                f.write(json.dumps({"dir": "tx", "t_ms": ms, "mono_ns": t0 + ms * 1_000_000,
                                    "planes": [1000, 1000], "cwnd": cw}) + "\n")
        lines = analyse(d, "w", window=(0.0, 1.0))
        assert lines[0].endswith(", median window 8192 B"), lines
        # --spans needs a fault switched on and off: one event is refused
        try:
            analyse(d, "w", spans=True)
            raise AssertionError("--spans took a scenario with one event")
        except SystemExit as e:
            assert "--spans needs a scenario that switches its fault on and off" in str(e), e
    # --rates without --period is refused with a clear error
    import subprocess
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "dir", "scn", "--rates"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--rates needs --period" in p.stderr, (p.returncode, p.stderr)
    print("plane_share self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", help="resilience.py --out DIR")
    ap.add_argument("scenario", nargs="?", help="scenario name (its directory in DIR)")
    ap.add_argument("--window", help="A,B: client time t_ms from A to B seconds instead of the fault")
    ap.add_argument("--period", type=int, default=0, help="ms: the share of --plane by ms of the period")
    ap.add_argument("--plane", type=int, default=1, help="0-based index into `planes` (default 1: p1)")
    ap.add_argument("--rates", action="store_true",
                    help="with --period: each plane's rate and the smoothed RTT by ms of the period")
    ap.add_argument("--spans", action="store_true",
                    help="a fault switched on and off in turn (21, 22): the faulted spans against the clean ones")
    ap.add_argument("--self-test", action="store_true", help="check the analysis on synthetic samples")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.out or not a.scenario:
        ap.error("DIR and SCENARIO are needed")
    window = None
    if a.window:
        try:
            lo, hi = (float(x) for x in a.window.split(","))
        except ValueError:
            ap.error(f"--window: '{a.window}' is not A,B (seconds)")
        if not lo < hi:
            ap.error(f"--window: {lo} is not before {hi}")
        window = (lo, hi)
    if a.rates and not a.period:
        ap.error("--rates needs --period")
    for line in analyse(a.out, a.scenario, window, a.period, a.plane, a.rates, a.spans):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
