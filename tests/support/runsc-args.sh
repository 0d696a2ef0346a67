# Sourced by the runsc test doubles beside it (runsc-fault-inject.sh, runsc-nvproxy-fault.sh):
# finds where runsc's subcommand starts in "${args[@]}" and sets sub_index (-1 when there is
# none). Global flags come before the subcommand (Go flag syntax: -f, --f, -f=v, -f v).
# Booleans take no separate value; every other flag without '=' does. Only flags stasis or its
# tests use, and the common booleans, need to be known here.
is_bool_flag() {
  case "${1#-}" in
    -*) is_bool_flag "${1#-}" ;;
    debug|alsologtostderr|nvproxy|nvproxy-docker|nvproxy-allow-unsupported-driver|tpuproxy|\
    rootless|strace|systemd-cgroup|allow-connected-on-save|ignore-cgroups|host-uds-create|\
    net-raw|gso|gvisor-gro|directfs|oci-seccomp|cpu-num-from-quota|version|help|h|\
    TESTONLY-unsafe-nonroot|TESTONLY-allow-packet-endpoint-write) return 0 ;;
    *) return 1 ;;
  esac
}

sub_index=-1
i=0
while (( i < ${#args[@]} )); do
  a="${args[i]}"
  if [[ "${a}" == "--" ]]; then break; fi
  if [[ "${a}" == -* ]]; then
    if [[ "${a}" != *=* ]] && ! is_bool_flag "${a}"; then i=$((i + 1)); fi
    i=$((i + 1))
    continue
  fi
  sub_index=${i}
  break
done
