#!/usr/bin/env bash
set -euo pipefail
cat >> /app/supervisord.conf <<'CONF'

[program:worker]
command = /srv/app/bin/worker --queue default
numprocs = 3
process_name = %(program_name)s_%(process_num)02d
directory = /srv/app
user = app
autostart = true
autorestart = true
stopwaitsecs = 30
environment = QUEUE_URL="redis://127.0.0.1:6379/0",LOG_LEVEL="info"
stdout_logfile = /var/log/app/worker_%(process_num)02d.log
redirect_stderr = true

[group:app]
programs = web,worker
CONF
