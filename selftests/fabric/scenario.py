#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
"""mrc fabric scenario runner (Python standard library only).

    scenario.py [--out DIR] [--build DIR] [--keep] [--check] SCENARIO

Builds the fabric a scenario names, starts its workload, applies the timeline
at the right times, samples per-plane counters every 10 ms and writes
DIR/scenario.json and DIR/goodput.png. Documentation/fabric.md, "Scenario
runner", gives the grammar; errors name the file and line.
"""

import argparse
import fnmatch
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FABRIC = os.path.join(HERE, "fabric.sh")
# Inside the VM layer (vm-tests/run.sh sets MRC_IN_VM=1) the guest may run
# under TCG, 10 to 30 times slower: gnuplot alone took more than 20 s there
# to list its terminals, and a clos fabric takes minutes to come up. The
# runner's time limits (tools, fabric.sh, gnuplot, the workloads' slack
# beyond the duration) are 5 times longer in the VM; the timeline is not.
VM_SLOW = 5 if os.environ.get("MRC_IN_VM") == "1" else 1
# MRC_SCENARIO_RATE_DIV=N divides every rate of a scenario (topology shape=,
# plane/link shape, trim and ecn rates, capacity) by N: the resilience driver
# sets it inside the VM, where the guest's CPU under TCG, not the fabric,
# would otherwise limit goodput. Unset (1) outside the VM.
RATE_DIV = float(os.environ.get("MRC_SCENARIO_RATE_DIV") or 1)
# MRC_SCENARIO_DURATION_MUL=N: the workloads run N times the scenario's
# duration ({duration}); the events keep their times. The resilience driver
# sets it in the VM, where each event's command may take seconds (mrcd.sh
# status ran 6 s under TCG) and the timeline falls behind the transfer.
DURATION_MUL = float(os.environ.get("MRC_SCENARIO_DURATION_MUL") or 1)


def div_rate(s):
    """A rate of the scenario, divided by RATE_DIV (tc and mrc_fault syntax)."""
    if RATE_DIV == 1:
        return s
    return f"{rate_bps(s, 'rate') / RATE_DIV / 1e3:g}kbit"


class ScenarioError(Exception):
    pass


def parse_time(s, where):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)?", s)
    if not m:
        raise ScenarioError(f"{where}: bad time '{s}' (use 3s, 2.5s or 200ms)")
    v = float(m.group(1))
    return v / 1000.0 if m.group(2) == "ms" else v


def parse_pct(s, where):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)%", s)
    if not m:
        raise ScenarioError(f"{where}: bad percentage '{s}' (use 5% or 0.5%)")
    return float(m.group(1))


RATE_RE = re.compile(r"\d+(\.\d+)?(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)", re.I)


def rate_bps(s, where):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)", s, re.I)
    if not m:
        raise ScenarioError(f"{where}: bad rate '{s}' (use 500mbit or 1gbit)")
    mult = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2).lower()]
    return float(m.group(1)) * mult


# ---------------------------------------------------------------------------
# Grammar
#
#   topology KIND key=value...          once, first; the words of `fabric.sh up`
#   duration TIME                       how long the workload runs ({duration})
#   sample TIME                         counter sampling period (default 10ms)
#   receiver NODE                       host whose ports give the per-plane series (default B)
#   recover PCT                         recovery threshold (default 90%)
#   capacity RATE                       reference for recovery (default: pre-fault median)
#   workload NODE: COMMAND              started in NODE's namespace, in file order
#   setup: COMMAND                      run (sh -c, calling namespaces) once the fabric
#                                       is up, before the workloads; must succeed
#   teardown: COMMAND                   run before the fabric goes down (also after errors)
#   at TIME: ACTION                     timeline
# ACTION:
#   plane P blackhole|heal|down|up|unshape
#   plane P loss PCT [sport N/MASK] | shape RATE | mtu BYTES  (mtu: a lower MTU inside the
#                                       path; heal restores it; sport: only the packets whose
#                                       UDP/TCP source port p has p & MASK == N: a share of
#                                       MRC's EVs, e.g. 0/3 for a quarter)
#   link NAME [fwd|rev|both] FAULT      NAME may be a glob (p*-l1-s0)
#     FAULT: blackhole | loss PCT | corrupt PCT | dup PCT |
#            trim RATE [burst BYTES] | ecn RATE [burst BYTES] |
#            clear | down | up | shape RATE | unshape | flap PERIOD for TIME |
#            flicker PERIOD[/DOWN]     (mrc_fault --flap: every packet dropped for DOWN,
#                                       default PERIOD/2, of each PERIOD until clear;
#                                       the carrier stays up: faster than flap can go)
#   exec NODE: COMMAND
#   snapshot LABEL                      record the counters of every fault program

PLANE_ACTIONS = {"blackhole": 0, "heal": 0, "down": 0, "up": 0, "unshape": 0, "loss": 1, "shape": 1, "mtu": 1}
LINK_FAULTS = {"blackhole": 0, "clear": 0, "down": 0, "up": 0, "unshape": 0,
               "loss": 1, "corrupt": 1, "dup": 1, "trim": 1, "ecn": 1, "shape": 1}


def parse_action(words, where):
    if not words:
        raise ScenarioError(f"{where}: empty action")
    kind = words[0]
    if kind == "plane":
        if len(words) < 3 or not words[1].isdigit():
            raise ScenarioError(f"{where}: want 'plane P ACTION'")
        act = words[2]
        if act not in PLANE_ACTIONS:
            raise ScenarioError(f"{where}: unknown plane action '{act}' (one of {', '.join(PLANE_ACTIONS)})")
        sport = None
        if act == "loss" and len(words) == 6 and words[4] == "sport":
            m = re.fullmatch(r"(\d+)/(\d+)", words[5])
            if not m or int(m.group(2)) > 65535 or int(m.group(1)) & ~int(m.group(2)) or not int(m.group(2)):
                raise ScenarioError(f"{where}: want 'sport N/MASK' (MASK 1..65535, N within it)")
            sport = (int(m.group(1)), int(m.group(2)))
            words = words[:4]
        if len(words) != 3 + PLANE_ACTIONS[act]:
            raise ScenarioError(f"{where}: 'plane P {act}' takes {PLANE_ACTIONS[act]} argument(s)")
        a = {"kind": "plane", "plane": int(words[1]), "action": act}
        if act == "loss":
            a["pct"] = parse_pct(words[3], where)
            if sport:
                a["sport"], a["sport_mask"] = sport
        if act == "shape":
            rate_bps(words[3], where)
            a["rate"] = words[3]
        if act == "mtu":
            if not words[3].isdigit() or not 1280 <= int(words[3]) <= 65535:
                raise ScenarioError(f"{where}: 'plane P mtu BYTES' wants 1280..65535")
            a["mtu"] = int(words[3])
        return a
    if kind == "link":
        if len(words) < 3:
            raise ScenarioError(f"{where}: want 'link NAME [fwd|rev|both] FAULT'")
        a = {"kind": "link", "link": words[1], "dir": "both"}
        rest = words[2:]
        if rest[0] in ("fwd", "rev", "both"):
            a["dir"] = rest[0]
            rest = rest[1:]
        if not rest:
            raise ScenarioError(f"{where}: missing fault after link {words[1]}")
        f = rest[0]
        a["action"] = f
        if f == "flap":
            if len(rest) != 4 or rest[2] != "for":
                raise ScenarioError(f"{where}: want 'link NAME flap PERIOD for DURATION'")
            a["period"] = parse_time(rest[1], where)
            a["duration"] = parse_time(rest[3], where)
            return a
        if f == "flicker":
            m = re.fullmatch(r"([^/]+)(?:/(.+))?", rest[1]) if len(rest) == 2 else None
            if not m:
                raise ScenarioError(f"{where}: want 'link NAME [fwd|rev|both] flicker PERIOD[/DOWN]'")
            a["period"] = parse_time(m.group(1), where)
            a["down"] = parse_time(m.group(2), where) if m.group(2) else a["period"] / 2
            if not 0 < a["down"] <= a["period"]:
                raise ScenarioError(f"{where}: flicker wants 0 < DOWN <= PERIOD")
            return a
        if f not in LINK_FAULTS:
            raise ScenarioError(f"{where}: unknown link fault '{f}' (one of {', '.join(LINK_FAULTS)}, flap)")
        if f in ("trim", "ecn") and len(rest) == 4 and rest[2] == "burst":
            if not rest[3].isdigit() or not 0 < int(rest[3]) <= 1 << 30:
                raise ScenarioError(f"{where}: bad burst '{rest[3]}' (bytes, 1..2^30)")
            a["burst"] = int(rest[3])
            rest = rest[:2]
        if len(rest) != 1 + LINK_FAULTS[f]:
            raise ScenarioError(f"{where}: 'link NAME {f}' takes {LINK_FAULTS[f]} argument(s)")
        if f in ("loss", "corrupt", "dup"):
            a["pct"] = parse_pct(rest[1], where)
        if f in ("trim", "ecn", "shape"):
            rate_bps(rest[1], where)
            a["rate"] = rest[1]
        return a
    if kind == "snapshot":
        if len(words) != 2 or not re.fullmatch(r"[A-Za-z0-9_.-]+", words[1]):
            raise ScenarioError(f"{where}: want 'snapshot LABEL' (letters, digits, _ . -)")
        return {"kind": "snapshot", "label": words[1]}
    if kind == "exec":
        m = re.fullmatch(r"exec\s+([A-Za-z0-9]+):\s*(.+)", " ".join(words))
        if not m:
            raise ScenarioError(f"{where}: want 'exec NODE: COMMAND'")
        return {"kind": "exec", "node": m.group(1), "command": m.group(2)}
    raise ScenarioError(f"{where}: unknown action '{kind}' (plane, link, exec or snapshot)")


def parse_scenario(path):
    sc = {"path": path, "topology": None, "duration": None, "sample": 0.01, "receiver": "B",
          "recover": 90.0, "capacity": None, "workloads": [], "events": [], "setup": [], "teardown": []}
    with open(path) as f:
        lines = f.readlines()
    for n, raw in enumerate(lines, 1):
        where = f"{path}:{n}"
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        key = words[0].rstrip(":")
        if key == "topology":
            if sc["topology"] is not None:
                raise ScenarioError(f"{where}: a second topology line")
            if len(words) < 2 or words[1] not in ("direct", "clos"):
                raise ScenarioError(f"{where}: want 'topology direct|clos key=value...'")
            for kv in words[2:]:
                if "=" not in kv:
                    raise ScenarioError(f"{where}: topology parameters are key=value, not '{kv}'")
            sc["topology"] = words[1:]
        elif key in ("duration", "sample"):
            if len(words) != 2:
                raise ScenarioError(f"{where}: want '{key} TIME'")
            sc[key] = parse_time(words[1], where)
        elif key == "receiver":
            if len(words) != 2:
                raise ScenarioError(f"{where}: want 'receiver NODE'")
            sc["receiver"] = words[1]
        elif key == "recover":
            if len(words) != 2:
                raise ScenarioError(f"{where}: want 'recover PCT'")
            sc["recover"] = parse_pct(words[1], where)
        elif key == "capacity":
            if len(words) != 2:
                raise ScenarioError(f"{where}: want 'capacity RATE'")
            sc["capacity"] = rate_bps(words[1], where) / RATE_DIV
        elif key == "workload":
            m = re.fullmatch(r"workload\s+([A-Za-z0-9]+)\s*:\s*(.+)", line)
            if not m:
                raise ScenarioError(f"{where}: want 'workload NODE: COMMAND'")
            sc["workloads"].append({"node": m.group(1), "template": m.group(2), "line": n})
        elif key in ("setup", "teardown"):
            m = re.fullmatch(r"(setup|teardown)\s*:\s*(.+)", line)
            if not m:
                raise ScenarioError(f"{where}: want '{key}: COMMAND'")
            sc[key].append({"template": m.group(2), "line": n})
        elif key == "at":
            m = re.fullmatch(r"at\s+(\S+?)\s*:\s*(.+)", line)
            if not m:
                raise ScenarioError(f"{where}: want 'at TIME: ACTION'")
            ev = parse_action(m.group(2).split(), where)
            ev["t"] = parse_time(m.group(1), where)
            ev["line"] = n
            ev["text"] = m.group(2)
            sc["events"].append(ev)
        else:
            raise ScenarioError(f"{where}: unknown statement '{words[0]}' "
                                "(topology, duration, sample, receiver, recover, capacity, workload, setup, teardown, at)")
    if sc["topology"] is None:
        raise ScenarioError(f"{path}: no topology line")
    if not sc["workloads"]:
        raise ScenarioError(f"{path}: no workload line")
    if sc["duration"] is None:
        sc["duration"] = max([e["t"] for e in sc["events"]] + [0]) + 3.0
    for e in sc["events"]:
        if e["t"] >= sc["duration"]:
            raise ScenarioError(f"{path}:{e['line']}: event at {e['t']}s is not before the end ({sc['duration']}s)")
    sc["events"].sort(key=lambda e: e["t"])
    sc["duration"] *= DURATION_MUL
    return sc


def check_against_state(sc, st):
    """Checks names in the timeline against the built fabric."""
    links = [l["name"] for l in st["links"]]
    for e in sc["events"]:
        where = f"{sc['path']}:{e['line']}"
        if e["kind"] == "plane" and not 0 <= e["plane"] < st["planes"]:
            raise ScenarioError(f"{where}: no plane {e['plane']} (the fabric has {st['planes']})")
        if e["kind"] == "link" and not fnmatch.filter(links, e["link"]):
            raise ScenarioError(f"{where}: no link matches '{e['link']}' (links: {' '.join(links)})")
        if e["kind"] == "exec" and e["node"] not in st["hosts"]:
            raise ScenarioError(f"{where}: no host {e['node']}")
    for w in sc["workloads"]:
        if w["node"] not in st["hosts"]:
            raise ScenarioError(f"{sc['path']}:{w['line']}: no host {w['node']}")
    if sc["receiver"] not in st["hosts"]:
        raise ScenarioError(f"{sc['path']}: receiver {sc['receiver']} is not a host")


# ---------------------------------------------------------------------------
# Running


class Runner:
    def __init__(self, sc, out, build, keep):
        self.sc, self.out, self.build, self.keep = sc, out, build, keep
        self.run = None
        self.st = None
        self.procs = []  # (name, Popen, logfile)
        self.sampler = None
        self.applied = []
        self.snapshots = {}  # label -> {"t_s", "counters": mrc_fault show --all}
        self.updates = []    # updated_mono_ns of the fault updates of the current event
        self.setup_ran = False
        self.t0 = None
        self.env = dict(os.environ)
        if build:
            self.env["MRC_BUILD_DIR"] = build
            extra = [os.path.join(build, d) for d in ("bench", "selftests/fabric", "user/tools")]
            self.env["PATH"] = ":".join(extra + [self.env.get("PATH", "/usr/bin:/bin")])

    def tool(self, name):
        for d in ("selftests/fabric", "bench", "user/tools"):
            p = os.path.join(self.build or "", d, name)
            if os.access(p, os.X_OK):
                return p
        raise ScenarioError(f"{name} not found under the build directory {self.build}")

    def fabric(self, *args, check=True):
        r = subprocess.run([FABRIC, *args], env=self.env, capture_output=True, text=True, timeout=120 * VM_SLOW)
        if check and r.returncode != 0:
            raise ScenarioError(f"fabric.sh {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def fault(self, *args):
        """mrc_fault with the run's state; for set/clear, records when each
        configuration update was in place (its updated_mono_ns)."""
        cmd = [self.tool("mrc_fault"), "--state", self.state_path, "--json", *args]
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=30 * VM_SLOW)
        if r.returncode != 0:
            raise ScenarioError(f"mrc_fault {' '.join(args)}: {r.stderr.strip()}")
        try:
            for a in json.loads(r.stdout or "[]"):
                if isinstance(a, dict) and "updated_mono_ns" in a:
                    self.updates.append(a["updated_mono_ns"])
        except json.JSONDecodeError:
            pass

    def substitute(self, template, where):
        st = self.st
        values = {"run": self.run, "duration": f"{self.sc['duration']:g}", "state": self.state_path,
                  "dir": os.path.dirname(self.state_path), "out": os.path.abspath(self.out),
                  "scndir": os.path.dirname(os.path.abspath(self.sc["path"])),
                  "build": self.build or "", "timeout": f"{self.sc['duration'] + 30 * VM_SLOW:g}",
                  "planes": str(st["planes"])}
        for node, h in st["hosts"].items():
            values[f"{node}.ns"] = h["ns"]
            values[f"{node}.ifnames"] = ",".join(p["ifname"] for p in h["ports"])
            for i, p in enumerate(h["ports"]):
                for fam in ("ipv4", "ipv6", "ifname", "mac", "nexthop_mac"):
                    values[f"{node}.p{i}.{fam}"] = p[fam]
                    if i == 0:
                        values[f"{node}.{fam}"] = p[fam]

        def rep(m):
            k = m.group(1)
            if k not in values:
                raise ScenarioError(f"{where}: unknown placeholder {{{k}}} (known: {', '.join(sorted(values))})")
            return values[k]

        return re.sub(r"\{([A-Za-z0-9_.]+)\}", rep, template)

    def fault_links(self, e):
        """Links an event touches (for pre-attaching the fault program)."""
        names = [l["name"] for l in self.st["links"]]
        if e["kind"] == "link":
            return fnmatch.filter(names, e["link"])
        if e["kind"] == "plane":
            return [l["name"] for l in self.st["links"] if l["plane"] == e["plane"] and l["a"]["node"] in self.st["hosts"]]
        return []

    def apply(self, e):
        k, act = e["kind"], e.get("action")
        if k == "plane":
            links = self.fault_links(e)
            if act == "blackhole":
                for l in links:
                    self.fault("set", l, "--dir", "both", "--blackhole")
            elif act == "loss":
                match = ["--match-sport", str(e["sport"]), "--match-sport-mask", str(e["sport_mask"])] \
                    if "sport_mask" in e else []
                for l in links:
                    self.fault("set", l, "--dir", "both", "--loss", f"{e['pct']}%", *match)
            elif act == "heal":
                # link up first (a no-op unless the plane was down), then the
                # map update, so t_applied_s is when the faults went away
                self.fabric("plane", self.run, str(e["plane"]), "up")
                self.fabric("plane", self.run, str(e["plane"]), "mtu", "restore")
                for l in links:
                    self.fault("clear", l, "--dir", "both")
            elif act == "shape":
                self.fabric("plane", self.run, str(e["plane"]), "shape", div_rate(e["rate"]))
            elif act == "mtu":
                self.fabric("plane", self.run, str(e["plane"]), "mtu", str(e["mtu"]))
            else:  # down, up, unshape
                self.fabric("plane", self.run, str(e["plane"]), act)
        elif k == "link":
            for l in self.fault_links(e):
                d = e["dir"]
                if act == "blackhole":
                    self.fault("set", l, "--dir", d, "--blackhole")
                elif act in ("loss", "corrupt", "dup"):
                    self.fault("set", l, "--dir", d, f"--{act}", f"{e['pct']}%")
                elif act == "flicker":
                    self.fault("set", l, "--dir", d, "--flap",
                               f"{round(e['period'] * 1e6)}us/{round(e['down'] * 1e6)}us")
                elif act in ("trim", "ecn"):
                    burst = ["--" + act + "-burst", str(e["burst"])] if "burst" in e else []
                    self.fault("set", l, "--dir", d, f"--{act}-rate", div_rate(e["rate"]), *burst)
                elif act == "clear":
                    self.fault("clear", l, "--dir", d)
                elif act in ("down", "up"):
                    self.fabric("link", self.run, l, act)
                elif act == "shape":
                    self.fabric("shape", self.run, l, div_rate(e["rate"]), d)
                elif act == "unshape":
                    self.fabric("unshape", self.run, l, d)
                elif act == "flap":
                    self.fabric("flap", self.run, l, f"{e['period']}", f"{e['duration']}")
        elif k == "snapshot":
            self.snapshot(e["label"])
        elif k == "exec":
            cmd = self.substitute(e["command"], f"{self.sc['path']}:{e['line']}")
            r = subprocess.run(["ip", "netns", "exec", self.st["hosts"][e["node"]]["ns"], "sh", "-c", cmd],
                               env=self.env, timeout=30 * VM_SLOW, capture_output=True, text=True, errors="replace")
            return {"exit": r.returncode, "output": (r.stdout + r.stderr)[-2000:]}

    def snapshot(self, label):
        """Counters of every attached fault program (mrc_fault show --all)."""
        t = (time.monotonic_ns() - self.t0) / 1e9 if self.t0 else None
        r = subprocess.run([self.tool("mrc_fault"), "--state", self.state_path, "--json", "show", "--all"],
                           env=self.env, capture_output=True, text=True, timeout=30 * VM_SLOW)
        if r.returncode != 0:
            raise ScenarioError(f"mrc_fault show --all: {r.stderr.strip()}")
        try:
            counters = json.loads(r.stdout or "[]")
        except json.JSONDecodeError as e:
            raise ScenarioError(f"mrc_fault show --all: {e}")
        self.snapshots[label] = {"t_s": t, "counters": counters}

    def execute(self):
        sc = self.sc
        os.makedirs(self.out, exist_ok=True)
        topo = [f"shape={div_rate(w[6:])}" if w.startswith("shape=") else w for w in sc["topology"]]
        if RATE_DIV != 1 and any(w.startswith("shape=") for w in topo) and \
                not any(w.startswith("latency=") for w in topo):
            # Buffers keep their bytes when the rates are divided: the tbf
            # queues hold 5 ms (fabric.sh's default latency) of the
            # undivided rate, as the trim and ECN
            # buckets keep theirs. 5 ms of 25 Mbit/s is five 3 KB frames: a
            # TCG guest's bursts and late qdisc timers overflowed it and
            # dropped trimmed headers before the receiver could NACK them.
            topo.append(f"latency={5 * RATE_DIV:g}ms")
        if RATE_DIV != 1:
            print(f"scenario: rates divided by {RATE_DIV:g} (MRC_SCENARIO_RATE_DIV): {' '.join(topo)}",
                  file=sys.stderr, flush=True)
        if DURATION_MUL != 1:
            print(f"scenario: the workloads run {sc['duration']:g} s (MRC_SCENARIO_DURATION_MUL={DURATION_MUL:g})",
                  file=sys.stderr, flush=True)
        self.run = self.fabric("up", *topo).strip().splitlines()[-1]
        self.state_path = self.fabric("state", self.run).strip()
        with open(self.state_path) as f:
            self.st = json.load(f)
        check_against_state(sc, self.st)
        # Pre-attach the fault program where the timeline will need it, so an
        # event is one map update.
        pre = sorted({l for e in sc["events"] for l in self.fault_links(e)
                      if e.get("action") in ("blackhole", "loss", "corrupt", "dup", "trim", "ecn", "clear", "mtu",
                                               "flicker")})
        for l in pre:
            self.fault("set", l, "--dir", "both")
        # Setup commands (e.g. daemons the workloads use), in the calling namespaces.
        for s in sc["setup"]:
            self.setup_ran = True
            cmd = self.substitute(s["template"], f"{sc['path']}:{s['line']}")
            r = subprocess.run(["sh", "-c", cmd], env=self.env, capture_output=True, text=True, timeout=120 * VM_SLOW)
            if r.returncode != 0:
                raise ScenarioError(f"{sc['path']}:{s['line']}: setup failed (exit {r.returncode}): "
                                    f"{(r.stderr or r.stdout).strip()}")
        # Per-plane counters: the receiver's ports (rx: delivered to it).
        recv = self.st["hosts"][sc["receiver"]]
        plane_if = {p["plane"]: p["ifname"] for p in recv["ports"]}
        sample_path = os.path.join(self.out, "counters.jsonl")
        self.sampler = subprocess.Popen(
            [self.tool("fabric_sample"), "--interval-ms", str(max(1, int(sc["sample"] * 1000))),
             "--duration-ms", str(int((sc["duration"] + 40 * VM_SLOW) * 1000)), "--out", sample_path,
             f"{recv['ns']}:{','.join(plane_if.values())}"], env=self.env)
        # Workloads, in file order; t0 is when the last one started.
        for i, w in enumerate(sc["workloads"]):
            cmd = self.substitute(w["template"], f"{sc['path']}:{w['line']}")
            log = open(os.path.join(self.out, f"workload{i}-{w['node']}.log"), "w")
            ns = self.st["hosts"][w["node"]]["ns"]
            p = subprocess.Popen(["ip", "netns", "exec", ns, "sh", "-c", cmd], stdout=log,
                                 stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
            self.procs.append((w, p, log, cmd))
            if i + 1 < len(sc["workloads"]):
                time.sleep(0.3)  # servers bind before clients connect (clients also retry)
        t0 = time.monotonic_ns()
        self.t0 = t0
        for e in sc["events"]:
            due = t0 + int(e["t"] * 1e9)
            while True:
                now = time.monotonic_ns()
                if now >= due:
                    break
                time.sleep(min(0.002, (due - now) / 1e9))
            t_start = time.monotonic_ns()
            self.updates = []
            extra = self.apply(e) or {}
            t_done = time.monotonic_ns()
            if self.updates:
                # when the fault programs had their new configuration
                extra["t_effect_s"] = (min(self.updates) - t0) / 1e9
                extra["t_effect_last_s"] = (max(self.updates) - t0) / 1e9
            self.applied.append({"t": e["t"], "line": e["line"], "action": e["text"],
                                 "t_start_s": (t_start - t0) / 1e9, "t_applied_s": (t_done - t0) / 1e9, **extra})
        deadline = t0 + int((sc["duration"] + 30 * VM_SLOW) * 1e9)
        for w, p, log, cmd in self.procs:
            left = max(0.1, (deadline - time.monotonic_ns()) / 1e9)
            try:
                p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=5)
        t_end = time.monotonic_ns()
        if pre:
            self.snapshot("end")
        self.sampler.send_signal(signal.SIGTERM)
        self.sampler.wait(timeout=10 * VM_SLOW)
        return t0, t_end, sample_path, plane_if

    def cleanup(self):
        for w, p, log, cmd in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
            log.close()
        if self.sampler and self.sampler.poll() is None:
            self.sampler.kill()
            self.sampler.wait()
        if self.setup_ran:
            for s in self.sc["teardown"]:
                try:
                    cmd = self.substitute(s["template"], f"{self.sc['path']}:{s['line']}")
                    subprocess.run(["sh", "-c", cmd], env=self.env, capture_output=True, timeout=60 * VM_SLOW)
                except (ScenarioError, subprocess.TimeoutExpired):
                    pass
        if self.run and not self.keep:
            self.fabric("down", self.run, check=False)


# ---------------------------------------------------------------------------
# Analysis


def read_counters(path, t0, plane_if, ns):
    """Per-plane 10 ms series of received bytes (rx_bytes deltas), by sample time."""
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    series = {p: [] for p in plane_if}
    times = []
    for a, b in zip(rows, rows[1:]):
        t = (b["t_ns"] - t0) / 1e9
        dt = (b["t_ns"] - a["t_ns"]) / 1e9
        if dt <= 0:
            continue
        times.append(t)
        for p, ifn in plane_if.items():
            k = f"{ns}/{ifn}"
            if k in a["c"] and k in b["c"]:
                series[p].append((b["c"][k][0] - a["c"][k][0]) * 8 / dt / 1e9)
            else:
                series[p].append(0.0)
    return times, series


def read_workload(path):
    """{"t_ms","bytes"} lines the workload printed (receiver side, not tx)."""
    out, summary = [], None
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    j = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "summary" in j:
                    summary = j["summary"]
                elif "t_ms" in j and "bytes" in j and j.get("dir") != "tx":
                    out.append(j)
    except OSError:
        pass
    return out, summary


def bin_series(times, values, width, t_end):
    """Averages a series into bins of `width` seconds from 0 to t_end."""
    n = max(1, int(t_end / width + 0.5))
    acc = [[] for _ in range(n)]
    for t, v in zip(times, values):
        i = int(t / width)
        if 0 <= i < n:
            acc[i].append(v)
    return [statistics.mean(a) if a else 0.0 for a in acc]


def analyse(sc, applied, times, total, planes_n):
    """Per-event figures from a goodput series (Gbit/s per sample bin).

    pre_median: median of 100 ms bins in the 2 s (or since the previous event)
    before the event; min_bin: lowest single sample bin in the second after it;
    first_100ms: mean over the first 100 ms; window: until the next event or
    7 s, in 100 ms bins (median, ratio to pre, time near zero = bins below 10%
    of pre); recover_ms: once the trailing 100 ms mean has dipped below the
    target, when it first reaches it again (0 when it never dipped)."""
    step = sc["sample"]
    series = list(zip(times, total))
    k = max(1, int(round(0.1 / step)))
    res = []
    ev_times = [a["t_applied_s"] for a in applied]

    def bins100(lo, hi):
        out, cur, edge = [], [], lo + 0.1
        for tt, v in series:
            if tt < lo or tt >= hi:
                continue
            while tt >= edge:
                if cur:
                    out.append(statistics.mean(cur))
                cur, edge = [], edge + 0.1
            cur.append(v)
        if cur and len(cur) >= k // 2:
            out.append(statistics.mean(cur))
        return out

    for i, a in enumerate(applied):
        t = a["t_applied_s"]
        nxt = ev_times[i + 1] if i + 1 < len(ev_times) else (times[-1] if times else t)
        pre_from = max(ev_times[i - 1] if i > 0 else 0.3, t - 2.0)
        pre = bins100(pre_from, t)
        post = [(tt, v) for (tt, v) in series if t <= tt < nxt]
        if not pre or len(post) < k:
            res.append({**a, "note": "not enough samples around the event"})
            continue
        pre_med = statistics.median(pre)
        ref = sc["capacity"] / 1e9 if sc["capacity"] else pre_med
        win_end = min(nxt, t + 7.0)
        win = bins100(t, win_end)
        first100 = [v for (tt, v) in post if tt < t + 0.1]
        # A starved sampler (a slow guest) may leave the first second empty.
        first1s = [v for (tt, v) in post if tt < t + 1.0]

        def recover_time(level):
            vals = [v for _, v in post]
            dipped = False
            for j in range(len(vals)):
                m = statistics.mean(vals[max(0, j - k + 1): j + 1])
                if j + 1 >= k and m < level:
                    dipped = True
                elif dipped and m >= level:
                    return round((post[j][0] - t) * 1000, 1)
            return None if dipped else 0.0

        r = {**a,
             "pre_median_gbps": round(pre_med, 4),
             "min_bin_gbps": round(min(first1s), 4) if first1s else None,
             "first_100ms_gbps": round(statistics.mean(first100), 4) if first100 else None,
             "window_s": round(win_end - t, 3),
             "window_median_gbps": round(statistics.median(win), 4) if win else None,
             "window_median_ratio": round(statistics.median(win) / pre_med, 4) if win and pre_med > 0 else None,
             "near_zero_ms": round(sum(1 for v in win if v < 0.1 * pre_med) * 100.0, 1),
             "recover_target_gbps": round(ref * sc["recover"] / 100.0, 4),
             "recover_ms": recover_time(ref * sc["recover"] / 100.0)}
        if re.match(r"plane \d+ (blackhole|down)", a["action"]) and planes_n > 1:
            remaining = pre_med * (planes_n - 1) / planes_n
            r["remaining_capacity_gbps"] = round(remaining, 4)
            r["recover_remaining_ms"] = recover_time(remaining * sc["recover"] / 100.0)
        res.append(r)
    return res


def plot(out, times, plane_series, total, app_t, app_v, applied):
    data = os.path.join(out, "goodput.dat")
    with open(data, "w") as f:
        f.write("# t_s total " + " ".join(f"plane{p}" for p in sorted(plane_series)) + "\n")
        for i, t in enumerate(times):
            f.write(f"{t:.4f} {total[i]:.5f} " + " ".join(f"{plane_series[p][i]:.5f}" for p in sorted(plane_series)) + "\n")
    appf = os.path.join(out, "workload.dat")
    with open(appf, "w") as f:
        for t, v in zip(app_t, app_v):
            f.write(f"{t:.4f} {v:.5f}\n")
    png = os.path.join(out, "goodput.png")
    g = [f"set terminal pngcairo size 1400,700 noenhanced" if gnuplot_has("pngcairo") else "set terminal png size 1400,700",
         f"set output '{png}'", "set title 'Goodput per plane (receiver rx, 10 ms bins) and total'",
         "set xlabel 'time (s)'", "set ylabel 'Gbit/s'", "set grid", "set key outside right top"]
    for a in applied:
        g.append(f"set arrow from {a['t_applied_s']},graph 0 to {a['t_applied_s']},graph 1 nohead lc rgb 'red' dt 2")
        g.append(f"set label \"{a['action']}\" at {a['t_applied_s']},graph 0.97 rotate by 90 right font ',8' tc rgb 'red'")
    cols = [f"'{data}' using 1:2 with lines lw 2 lc rgb 'black' title 'total (wire)'"]
    for i, p in enumerate(sorted(plane_series)):
        cols.append(f"'{data}' using 1:{3 + i} with lines title 'plane {p}'")
    if app_t:
        cols.append(f"'{appf}' using 1:2 with lines lw 1 dt 3 lc rgb 'blue' title 'workload goodput'")
    g.append("plot " + ", ".join(cols))
    r = subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True, capture_output=True,
                       timeout=60 * VM_SLOW)
    if r.returncode != 0:
        raise ScenarioError(f"gnuplot: {r.stderr.strip()}")
    return png


def gnuplot_has(term):
    r = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True, timeout=20 * VM_SLOW,
                       stdin=subprocess.DEVNULL)
    return term in (r.stdout + r.stderr)


def plot_or_none(*args):
    """The plot, or None (said on stderr) when gnuplot does not finish in
    time: the figures are all in scenario.json, the PNG only shows them."""
    try:
        return plot(*args)
    except subprocess.TimeoutExpired as e:
        print(f"scenario: gnuplot did not finish within {e.timeout:g} s; no plot written "
              f"(scenario.json is complete)", file=sys.stderr)
        return None


def reanalyse(path):
    with open(path) as f:
        r = json.load(f)
    sc = {"sample": r["sample_s"], "capacity": r["summary"].get("capacity_bps"),
          "recover": r["summary"]["recover_threshold_pct"]}
    n = len(r["samples"]["planes_gbps"])
    r["summary"]["events"] = analyse(sc, r["faults"], r["samples"]["t_s"], r["samples"]["total_gbps"], n)
    w = r["workload_samples"]
    r["summary"]["events_workload"] = analyse(sc, r["faults"], w["t_s"], w["gbps"], n) if w["t_s"] else []
    with open(path, "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(brief(r["summary"]), indent=1))
    return 0


def brief(summary):
    keys = ("action", "t_applied_s", "pre_median_gbps", "first_100ms_gbps", "min_bin_gbps",
            "window_median_ratio", "near_zero_ms", "recover_ms", "recover_remaining_ms")
    return {src: [{k: e.get(k) for k in keys} for e in summary[src]] for src in ("events_workload", "events")}


def main():
    ap = argparse.ArgumentParser(description="mrc fabric scenario runner")
    ap.add_argument("scenario")
    ap.add_argument("--out", default=None, help="output directory (default: ./scenario-<name>)")
    ap.add_argument("--build", default=os.environ.get("MRC_BUILD_DIR"), help="build directory with the tools")
    ap.add_argument("--keep", action="store_true", help="leave the fabric up (fabric.sh down RUN later)")
    ap.add_argument("--check", action="store_true", help="only parse the scenario")
    ap.add_argument("--reanalyse", action="store_true",
                    help="SCENARIO is a scenario.json: recompute its summary from the stored samples")
    args = ap.parse_args()
    if args.reanalyse:
        return reanalyse(args.scenario)
    try:
        sc = parse_scenario(args.scenario)
    except ScenarioError as e:
        print(f"scenario: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"scenario: {e}", file=sys.stderr)
        return 2
    if args.check:
        print(json.dumps({"ok": True, "events": len(sc["events"]), "workloads": len(sc["workloads"])}))
        return 0
    if os.geteuid() != 0:
        print("scenario: needs root (network namespaces)", file=sys.stderr)
        return 77
    out = args.out or os.path.join(os.getcwd(), "scenario-" + os.path.splitext(os.path.basename(args.scenario))[0])
    runner = Runner(sc, out, args.build, args.keep)
    def on_term(_sig, _frame):
        raise KeyboardInterrupt()

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        t0, t_end, sample_path, plane_if = runner.execute()
        recv_ns = runner.st["hosts"][sc["receiver"]]["ns"]
        times, plane_series = read_counters(sample_path, t0, plane_if, recv_ns)
        total = [sum(plane_series[p][i] for p in plane_series) for i in range(len(times))]
        app_t, app_v, summaries = [], [], []
        for i, (w, p, log, cmd) in enumerate(runner.procs):
            samples, summary = read_workload(log.name)
            if summary:
                summaries.append({"node": w["node"], "command": cmd, "exit": p.returncode, "summary": summary})
            else:
                summaries.append({"node": w["node"], "command": cmd, "exit": p.returncode})
            if samples and not app_t:
                # receiver samples: mono_ns (CLOCK_MONOTONIC, the runner's
                # clock) when the tool prints it, else t_ms from its first
                # connection (~t0)
                # and the rate over each sample's own interval (a late wake-up
                # makes one interval longer and the next shorter)
                if all("mono_ns" in s for s in samples):
                    pairs = [(b, (b["mono_ns"] - a["mono_ns"]) / 1e9) for a, b in zip(samples, samples[1:])]
                    pairs = [(s, dt) for s, dt in pairs if dt > 0]
                    app_t = [(s["mono_ns"] - t0) / 1e9 for s, _ in pairs]
                    app_v = [s["bytes"] * 8 / dt / 1e9 for s, dt in pairs]
                else:
                    app_t = [s["t_ms"] / 1000.0 for s in samples]
                    steps = [(b["t_ms"] - a["t_ms"]) / 1000.0 for a, b in zip(samples, samples[1:])]
                    step = statistics.median(steps) if steps else sc["sample"]
                    app_v = [s["bytes"] * 8 / step / 1e9 for s in samples]
        events = analyse(sc, runner.applied, times, total, len(plane_if))
        app_events = analyse(sc, runner.applied, app_t, app_v, len(plane_if)) if app_t else []
        png = plot_or_none(out, times, plane_series, total, app_t, app_v, runner.applied)
        total_bytes = sum(v * 1e9 / 8 * sc["sample"] for v in total)
        result = {
            "scenario": os.path.abspath(sc["path"]),
            "run": runner.run,
            "topology": sc["topology"],
            "duration_s": sc["duration"],
            "t0_mono_ns": t0,
            "sample_s": sc["sample"],
            "receiver": sc["receiver"],
            "faults": runner.applied,
            "workloads": summaries,
            "fault_counters": runner.snapshots,
            "samples": {"t_s": [round(t, 4) for t in times],
                        "total_gbps": [round(v, 5) for v in total],
                        "planes_gbps": {str(p): [round(v, 5) for v in s] for p, s in plane_series.items()},
                        "source": f"rx_bytes of {sc['receiver']}'s plane ports (wire bytes)"},
            "workload_samples": {"t_s": app_t, "gbps": [round(v, 5) for v in app_v]},
            "summary": {
                "wire_bytes": int(total_bytes),
                "wire_mean_gbps": round(statistics.mean(total), 4) if total else 0,
                "events": events,
                "events_workload": app_events,
                "recover_threshold_pct": sc["recover"],
                "capacity_bps": sc["capacity"],
            },
            "plot": png,
        }
        with open(os.path.join(out, "scenario.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps({"out": out, "run": runner.run, "events": brief(result["summary"]),
                          "workloads": summaries}, indent=1))
        return 0
    except ScenarioError as e:
        print(f"scenario: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scenario: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old)
        runner.cleanup()


if __name__ == "__main__":
    sys.exit(main())
