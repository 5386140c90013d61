#!/usr/bin/env bash
set -euo pipefail
cat > /app/crontab <<'CRON'
MAILTO=ops@example.com
# m  h     dom mon dow  command
30   2     *   *   *    /app/jobs/backup.sh
0    8     *   *   1-5  /app/jobs/report.sh
*/15 9-17  *   *   mon-fri /app/jobs/poll.sh
0    0     1   *   *    /app/jobs/cleanup.sh
59   23    *   *   0    /app/jobs/rotate.sh
CRON
