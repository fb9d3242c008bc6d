#!/bin/sh
# A .deb of an installed tree: dist/mkdeb.sh ROOT OUT.deb VERSION
# ROOT holds `make install PREFIX=/usr DESTDIR=ROOT`. The dependencies are the
# packages that own the shared libraries the binaries link (as this machine
# has them), so the package installs where those exist.
set -eu
root=$1 out=$2 version=$3
arch=$(dpkg --print-architecture)
# the libraries the binaries name (DT_NEEDED), where the loader finds them here
deps=$(for f in "$root"/usr/bin/stepblame "$root"/usr/lib/libstepblame.so; do
		needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
		ldd "$f" | awk -v n=" $(echo $needed) " '$3 ~ /^\// && index(n, " " $1 " ") { print $3 }'
	done | sort -u |
	while read -r lib; do
		dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
	done | cut -d: -f1 | sort -u | paste -sd, - | sed 's/,/, /g')
size=$(du -sk "$root" | cut -f1)
mkdir -p "$root/DEBIAN" "$root/etc/default"
install -m 0644 dist/stepblame-watch.default "$root/etc/default/stepblame-watch"
echo /etc/default/stepblame-watch >"$root/DEBIAN/conffiles"
cat >"$root/DEBIAN/control" <<CONTROL
Package: stepblame
Version: $version
Architecture: $arch
Maintainer: stepblame developers <stepblame@localhost>
Installed-Size: $size
Depends: $deps
Section: devel
Priority: optional
Description: per-step blame for deep-learning training jobs
 Attaches to a running trainer by PID (eBPF) and reports, for every training
 step, how long it took, how long the GPU sat idle, and which host events made
 it so: preemption by other processes, run-queue waits, migrations, page
 faults, memory reclaim, slow allocator calls, blocking I/O, waits on data
 loaders, CUDA syncs. The tail steps are explained cause by cause.
CONTROL
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
