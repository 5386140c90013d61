#!/usr/bin/env bash
set -euo pipefail
cat > /app/logrotate.d/webapp <<'CONF'
/var/log/webapp/*.log {
    daily
    rotate 14
    compress
    delaycompress
    missingok
    notifempty
    create 0640 webapp adm
    sharedscripts
    postrotate
        systemctl reload webapp >/dev/null 2>&1 || true
    endscript
}
CONF
