#!/usr/bin/env bash
# The public headers stand alone (issue: "no include of user/"): each header
# of include/mrc/ that libmrc-dev installs compiles on its own with only
# include/ on the include path, warnings as errors: the C header as C11 and
# as C++, the C++ headers as C++20 with g++ and, when installed, clang++.
# Fails naming the header and the compiler's first lines.
set -u
src=${MRC_SOURCE_DIR:?}/include
fails=0
try() { # LANG STD COMPILER HEADER
	local out
	if out=$(printf '#include <mrc/%s>\n#include <mrc/%s>\nint mrc_header_test_(void);\n' "$4" "$4" |
		"$3" -x "$1" -std="$2" -fsyntax-only -Wall -Wextra -Werror -pedantic-errors -I "$src" - 2>&1); then
		echo "ok - $4 alone ($3 -std=$2)"
	else
		echo "not ok - $4 alone ($3 -std=$2):"
		head -8 <<<"$out" | sed 's/^/#   /'
		fails=$((fails + 1))
	fi
}
cxx=(g++)
command -v clang++ >/dev/null && cxx+=(clang++)
try c c11 gcc mrc.h
for c in "${cxx[@]}"; do
	try c++ c++17 "$c" mrc.h
	for h in mrc.hpp types.hpp config.hpp result.hpp; do try c++ c++20 "$c" "$h"; done
done
# What mrc.hpp pulls in must be what libmrc-dev installs (packaging/).
inc=$(printf '#include <mrc/mrc.hpp>\n' | g++ -x c++ -std=c++20 -M -I "$src" - 2>/dev/null |
	tr ' \\' '\n\n' | grep -F "$src/" | sed "s|^$src/||" | sort -u | paste -sd' ')
want="mrc/config.hpp mrc/mrc.hpp mrc/result.hpp mrc/types.hpp mrc/uapi/maps.h mrc/uapi/wire.h"
if [ "$inc" = "$want" ]; then echo "ok - mrc.hpp includes: $inc"; else
	echo "not ok - mrc.hpp includes '$inc', packaging installs '$want'"
	fails=$((fails + 1))
fi
[ "$fails" = 0 ]
