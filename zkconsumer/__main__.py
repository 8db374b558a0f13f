import sys

from zkconsumer.cli import main

sys.exit(main())
