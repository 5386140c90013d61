#!/usr/bin/env bash
set -euo pipefail
cat > /app/deploy/webapp.service <<'UNIT'
[Unit]
Description=Webapp API server
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
User=webapp
Group=webapp
WorkingDirectory=/srv/webapp
EnvironmentFile=/etc/webapp/env
Environment=PORT=8080 LOG_LEVEL=info
ExecStart=/srv/webapp/bin/server --port ${PORT}
Restart=on-failure
RestartSec=5
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=/var/lib/webapp

[Install]
WantedBy=multi-user.target
UNIT
