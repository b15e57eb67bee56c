"""`python -m softswitch`: see softswitch.cli."""

import sys

from softswitch.cli import main

if __name__ == "__main__":
    sys.exit(main())
