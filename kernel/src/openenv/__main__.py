"""``python -m openenv`` runs the CLI (used by providers to start servers with this interpreter)."""

from openenv.cli.main import main

main()
