#!/usr/bin/env bash
# Builds the micro-VM bundle the tests and the demo boot (docs/microvm.md), from Debian packages,
# once per machine: Debian's cloud kernel (vmlinuz, extracted with dpkg-deb) and a busybox
# initramfs whose /init prints "booted" once and then "count N" on the serial console twice a
# second. Cached outside the repo under ${STASIS_CACHE}/microvm/<kernel>-<busybox>/ (keyed by
# both package versions); prints the bundle directory.
#
# A bundle is a directory with microvm.json (runtimes/microvm_bundle.h) beside the files it
# names. Needs apt-get (download only; nothing is installed) and busybox-static (install-deps.sh).
source "$(dirname "$0")/lib.sh"

kernel_pkg="${MICROVM_KERNEL_PACKAGE}"
if ! apt-cache show "${kernel_pkg}" >/dev/null 2>&1; then
  fallback="$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')"
  [[ -n "${fallback}" ]] || die "neither ${kernel_pkg} nor linux-image-cloud-amd64 is known to apt"
  log "WARNING: ${kernel_pkg} is not in the archive; using ${fallback} (update MICROVM_KERNEL_PACKAGE)"
  kernel_pkg="${fallback}"
fi
kernel_version="$(apt-cache show "${kernel_pkg}" | awk '/^Version:/{print $2; exit}')"
busybox_version="$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null)" \
  || die "busybox-static is not installed (hack/install-deps.sh)"
key="$(printf '%s_%s-busybox_%s' "${kernel_pkg}" "${kernel_version}" "${busybox_version}" | tr ':+~' '___')"
dest="${STASIS_CACHE}/microvm/${key}"
if [[ -f "${dest}/microvm.json" ]]; then
  echo "${dest}"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
log "building micro-VM bundle ${key}"
(cd "${work}" && apt-get download -q "${kernel_pkg}=${kernel_version}" >/dev/null 2>"${work}/download.err") \
  || { cat "${work}/download.err" >&2; die "apt-get download ${kernel_pkg} failed"; }
dpkg-deb -x "${work}"/"${kernel_pkg}"_*.deb "${work}/kernel"
vmlinuz="$(ls "${work}"/kernel/boot/vmlinuz-* | head -n1)"
[[ -f "${vmlinuz}" ]] || die "no vmlinuz in ${kernel_pkg}"

# The initramfs: busybox and an /init that runs the counter. The kernel's own messages go to
# the console too; the test reads only "booted" and "count N" lines.
root="${work}/initramfs"
mkdir -p "${root}"/{bin,dev,proc,sys,tmp}
cp /bin/busybox "${root}/bin/busybox"
cat > "${root}/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo booted
i=0
while true; do echo "count $i"; i=$((i+1)); sleep 0.5; done
INIT
chmod 0755 "${root}/init"
(cd "${root}" && find . | LC_ALL=C sort | busybox cpio -o -H newc 2>/dev/null | gzip -9n) > "${work}/initramfs.gz"

staging="${dest}.tmp.$$"
rm -rf "${staging}"
mkdir -p "${staging}"
cp "${vmlinuz}" "${staging}/vmlinuz"
cp "${work}/initramfs.gz" "${staging}/initramfs.gz"
cat > "${staging}/microvm.json" <<JSON
{
  "kernel": "vmlinuz",
  "initramfs": "initramfs.gz",
  "memoryMiB": 256,
  "vcpus": 1,
  "cmdline": "console=ttyS0 panic=-1 quiet"
}
JSON
mkdir -p "$(dirname "${dest}")"
# Two builds at once (parallel tests): the first rename wins, the other drops its copy.
if ! mv -T "${staging}" "${dest}" 2>/dev/null; then
  rm -rf "${staging}"
  [[ -f "${dest}/microvm.json" ]] || die "cannot install ${dest}"
fi
log "built ${dest}"
echo "${dest}"
