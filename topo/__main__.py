"""`python -m topo run|stop|demo|compile`: see topo.cli."""

import sys

from topo.cli import main

if __name__ == "__main__":
    sys.exit(main())
