#!/bin/sh
# Checks (or, with --fix, applies) the .clang-format style of the tree's C and
# C++ sources, as CTest test `clang_format` (label unit) does.
#
#   C++ (*.cc, *.hpp): the top-level .clang-format (Google based, 100 columns).
#   C   (*.c, *.h):    kernel style, bpf/.clang-format (tabs): the BPF programs,
#                      the uapi headers they share with C++, mrc.h and the C
#                      examples and tests.
#
# Usage: scripts/check_format.sh [--fix] [--clang-format PROGRAM]
# Exit 0: every file conforms (or was fixed); 1: some do not (listed);
# 77: no clang-format here (the test skips).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
fix=0
cf=
while [ $# -gt 0 ]; do
	case $1 in
	--fix) fix=1 ;;
	--clang-format) cf=$2; shift ;;
	*) echo "usage: $0 [--fix] [--clang-format PROGRAM]" >&2; exit 2 ;;
	esac
	shift
done
if [ -z "$cf" ]; then
	cf=$(command -v clang-format-14 || command -v clang-format || true)
fi
if [ -z "$cf" ] || ! "$cf" --version >/dev/null 2>&1; then
	echo "clang-format not found: skipped" >&2
	exit 77
fi
cd "$src"
# The tracked files in a git checkout; every file otherwise (a source tarball).
if [ -e .git ] && command -v git >/dev/null 2>&1; then
	files=$(git ls-files -- '*.c' '*.h' '*.cc' '*.hpp')
else
	files=$(find . -path ./build -prune -o -path './build-*' -prune -o \
		\( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.hpp' \) -print | sed 's|^\./||')
fi
bad=0
for f in $files; do
	[ -f "$f" ] || continue
	case $f in
	*.c | *.h) style="--style=file:$src/bpf/.clang-format" ;;
	*) style="--style=file:$src/.clang-format" ;;
	esac
	if [ $fix = 1 ]; then
		"$cf" $style -i "$f"
	elif ! "$cf" $style --dry-run -Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (scripts/check_format.sh --fix)"
		bad=1
	fi
done
exit $bad
