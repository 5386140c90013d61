#!/usr/bin/env bash
# Oracle: one Host block per row, then the defaults in a final "Host *" (first match wins).
set -euo pipefail
mkdir -p /app/ssh
{
  tail -n +2 /app/hosts.csv | while IFS=, read -r alias hostname user port jump; do
    printf 'Host %s\n    HostName %s\n    User %s\n    Port %s\n' "$alias" "$hostname" "$user" "$port"
    [ -n "$jump" ] && printf '    ProxyJump %s\n' "$jump"
    echo
  done
  printf 'Host *\n    ServerAliveInterval 60\n    IdentitiesOnly yes\n    IdentityFile ~/.ssh/id_ed25519\n'
} > /app/ssh/config
