#!/usr/bin/env bash
# Makes an OCI bundle whose root filesystem is Debian's busybox-static, running a counter that
# writes an ever-increasing number to /tmp/counter ten times a second (a workload whose
# continuity after restore is easy to see).
#
#   hack/make-bundle.sh DIR
source "$(dirname "$0")/lib.sh"
dir="${1:?usage: $0 DIR}"
[[ -x /bin/busybox ]] || die "/bin/busybox missing: run hack/install-deps.sh (busybox-static)"
mkdir -p "${dir}/rootfs"/{bin,proc,dev,sys,tmp,data,etc}
cp /bin/busybox "${dir}/rootfs/bin/busybox"
for applet in sh cat echo sleep ls test true wc date; do ln -sf busybox "${dir}/rootfs/bin/${applet}"; done
cat > "${dir}/config.json" <<'JSON'
{
  "ociVersion": "1.0.2",
  "process": {
    "terminal": false,
    "user": {"uid": 0, "gid": 0},
    "args": ["/bin/sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done"],
    "env": ["PATH=/bin", "HOME=/"],
    "cwd": "/",
    "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "permitted": ["CAP_KILL"]},
    "noNewPrivileges": true
  },
  "root": {"path": "rootfs", "readonly": false},
  "hostname": "stasis-actor",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}
  ],
  "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]}
}
JSON
echo "${dir}"
