#!/usr/bin/env bash
# Scenario runner entry point: see scenario.py and Documentation/fabric.md.
exec python3 "$(dirname "$(readlink -f "$0")")/scenario.py" "$@"
