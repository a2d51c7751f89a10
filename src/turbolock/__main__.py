import sys

from turbolock.cli import main

sys.exit(main())
