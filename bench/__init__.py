"""OpenEnv benchmark suite (issue 8): our server against the transport limit and upstream 0.10.

Run it with ``nox -s bench`` (``-- --quick`` for the ~30 s CI version, ``-- --scale`` for the
2,048-session hold). See ``bench/README.md`` for what each number means.

Layout: ``cli`` parses arguments; ``suite`` runs rounds of every target in rotated order;
``targets`` starts and stops the server processes; ``loadgen`` is the load-generator process, whose
hot loop is ``engine`` (epoll) over the client wire code of ``clientwire``; ``procfs`` reads CPU,
memory and threads from ``/proc``; ``report`` prints the tables and writes JSON. ``bare_echo`` (the
transport limit) and ``upstream_echo`` (upstream 0.10, run in its own venv) are server programs.
``profile`` (py-spy by layer) and ``microbench`` (app-level cost without sockets) are diagnostics.
"""
