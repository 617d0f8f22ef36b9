import sys

from fakerabbit.cli import main

sys.exit(main())
