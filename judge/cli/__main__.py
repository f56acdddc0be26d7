"""``python -m judge.cli`` runs ``judge-data`` (the console scripts may be off PATH)."""

import sys

from judge.cli.data import data_main

sys.exit(data_main())
